package state

import "maps"

// heapValues keeps a value state's values in a Go map.
type heapValues[K comparable, V any] struct {
	b     *KeyedBackend[K]
	codec Codec[V]
	m     map[K]V
	changedKeys[K]
}

func newHeapValues[K comparable, V any](b *KeyedBackend[K], codec Codec[V]) *heapValues[K, V] {
	return &heapValues[K, V]{b: b, codec: codec, m: make(map[K]V)}
}

func (s *heapValues[K, V]) get() (V, bool) {
	v, ok := s.m[s.b.current]
	return v, ok
}

func (s *heapValues[K, V]) set(v V) {
	s.m[s.b.current] = v
	s.note(s.b.current)
}

func (s *heapValues[K, V]) clear() {
	delete(s.m, s.b.current)
	s.note(s.b.current)
}

func (s *heapValues[K, V]) keys() int { return len(s.m) }

func (s *heapValues[K, V]) captureKeys(keys map[K]struct{}) (capturedTable[K], []K) {
	m := make(map[K]V, len(keys))
	var removed []K
	for k := range keys {
		if v, ok := s.m[k]; ok {
			m[k] = v
		} else {
			removed = append(removed, k)
		}
	}
	return valueCapture[K, V]{m: m, codec: s.codec}, removed
}

func (s *heapValues[K, V]) kind() stateKind { return kindValue }

func (s *heapValues[K, V]) capture() capturedTable[K] {
	return valueCapture[K, V]{m: maps.Clone(s.m), codec: s.codec}
}

type valueCapture[K comparable, V any] struct {
	m     map[K]V
	codec Codec[V]
}

// encode writes entries: key, value.
func (c valueCapture[K, V]) encode(w *sectionWriter[K]) error {
	enc := appendFunc(c.codec)
	for k, v := range c.m {
		i, err := w.key(k)
		if err != nil {
			return err
		}
		if err := putValue(w, i, enc, v); err != nil {
			return err
		}
	}
	return nil
}

func (s *heapValues[K, V]) stage(r *sectionReader[K], count int) (func(), error) {
	keys := make([]K, count)
	vals := make([]V, count)
	for i := range count {
		var err error
		if keys[i], err = r.key(); err != nil {
			return nil, err
		}
		if _, _, err = r.expiry(); err != nil { // a state that had a TTL
			return nil, err
		}
		if vals[i], err = readValue(r, s.codec); err != nil {
			return nil, err
		}
	}
	return func() {
		for i, k := range keys {
			s.m[k] = vals[i]
		}
	}, nil
}
