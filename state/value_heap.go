package state

import (
	"iter"
	"maps"
)

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
	c := valueEntries[K, V]{keys: make([]K, 0, len(keys)), vals: make([]V, 0, len(keys)), codec: s.codec}
	var removed []K
	for k := range keys {
		if v, ok := s.m[k]; ok {
			c.keys, c.vals = append(c.keys, k), append(c.vals, v)
		} else {
			removed = append(removed, k)
		}
	}
	return c, removed
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
	return encodeValues(w, c.codec, maps.All(c.m))
}

// valueEntries is a value state's entries captured for a change set, in
// two slices: a capture of the keys changed at short intervals costs no
// map of its own.
type valueEntries[K comparable, V any] struct {
	keys  []K
	vals  []V
	codec Codec[V]
}

// encode writes entries: key, value.
func (c valueEntries[K, V]) encode(w *sectionWriter[K]) error {
	return encodeValues(w, c.codec, func(yield func(K, V) bool) {
		for i, k := range c.keys {
			if !yield(k, c.vals[i]) {
				return
			}
		}
	})
}

// encodeValues writes the entries of a value state: key, value.
func encodeValues[K comparable, V any](w *sectionWriter[K], codec Codec[V], entries iter.Seq2[K, V]) error {
	enc := appendFunc(codec)
	for k, v := range entries {
		i, in, err := w.key(k)
		if err != nil {
			return err
		}
		if !in {
			continue
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
