package state

import (
	"iter"
	"maps"

	"github.com/exactlyonce/exactly/internal/format"
)

// heapMaps keeps a map state's maps in Go maps.
type heapMaps[K comparable, UK comparable, UV any] struct {
	b          *KeyedBackend[K]
	keyCodec   Codec[UK]
	valueCodec Codec[UV]
	m          map[K]map[UK]UV // inner maps are never empty
	changedKeys[K]
}

// changed notes that the current key's map changed.
func (s *heapMaps[K, UK, UV]) changed() { s.note(s.b.current) }

func (s *heapMaps[K, UK, UV]) keys() int { return len(s.m) }

func (s *heapMaps[K, UK, UV]) captureKeys(keys map[K]struct{}) (capturedTable[K], []K) {
	m := make(map[K]map[UK]UV, len(keys))
	var removed []K
	for k := range keys {
		if inner, ok := s.m[k]; ok {
			m[k] = maps.Clone(inner)
		} else {
			removed = append(removed, k)
		}
	}
	return mapCapture[K, UK, UV]{m: m, keyCodec: s.keyCodec, valueCodec: s.valueCodec}, removed
}

func newHeapMaps[K comparable, UK comparable, UV any](b *KeyedBackend[K], keyCodec Codec[UK], valueCodec Codec[UV]) *heapMaps[K, UK, UV] {
	return &heapMaps[K, UK, UV]{b: b, keyCodec: keyCodec, valueCodec: valueCodec, m: make(map[K]map[UK]UV)}
}

func (s *heapMaps[K, UK, UV]) get(uk UK) (UV, bool) {
	v, ok := s.m[s.b.current][uk]
	return v, ok
}

// inner returns the current key's map, adding an empty one if it has none.
func (s *heapMaps[K, UK, UV]) inner() map[UK]UV {
	inner, ok := s.m[s.b.current]
	if !ok {
		inner = make(map[UK]UV)
		s.m[s.b.current] = inner
	}
	return inner
}

func (s *heapMaps[K, UK, UV]) put(uk UK, uv UV) {
	s.inner()[uk] = uv
	s.changed()
}

func (s *heapMaps[K, UK, UV]) compute(uk UK, f func(old UV, ok bool) UV) UV {
	inner := s.inner()
	old, ok := inner[uk]
	v := f(old, ok)
	inner[uk] = v
	s.changed()
	return v
}

func (s *heapMaps[K, UK, UV]) remove(uk UK) {
	inner, ok := s.m[s.b.current]
	if !ok {
		return
	}
	delete(inner, uk)
	if len(inner) == 0 {
		delete(s.m, s.b.current)
	}
	s.changed()
}

func (s *heapMaps[K, UK, UV]) contains(uk UK) bool {
	_, ok := s.m[s.b.current][uk]
	return ok
}

func (s *heapMaps[K, UK, UV]) len() int { return len(s.m[s.b.current]) }

func (s *heapMaps[K, UK, UV]) all() iter.Seq2[UK, UV] { return maps.All(s.m[s.b.current]) }

func (s *heapMaps[K, UK, UV]) clear() {
	delete(s.m, s.b.current)
	s.changed()
}

func (s *heapMaps[K, UK, UV]) kind() stateKind { return kindMap }

func (s *heapMaps[K, UK, UV]) capture() capturedTable[K] {
	m := make(map[K]map[UK]UV, len(s.m))
	for k, inner := range s.m {
		m[k] = maps.Clone(inner)
	}
	return mapCapture[K, UK, UV]{m: m, keyCodec: s.keyCodec, valueCodec: s.valueCodec}
}

type mapCapture[K comparable, UK comparable, UV any] struct {
	m          map[K]map[UK]UV
	keyCodec   Codec[UK]
	valueCodec Codec[UV]
}

// encode writes entries: key, entry count, then user key and value per entry.
func (c mapCapture[K, UK, UV]) encode(w *sectionWriter[K]) error {
	encKey, encValue := appendFunc(c.keyCodec), appendFunc(c.valueCodec)
	for k, inner := range c.m {
		i, in, err := w.key(k)
		if err != nil {
			return err
		}
		if !in {
			continue
		}
		w.putCount(i, len(inner))
		for uk, uv := range inner {
			if err := putValue(w, i, encKey, uk); err != nil {
				return err
			}
			if err := putValue(w, i, encValue, uv); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *heapMaps[K, UK, UV]) stage(r *sectionReader[K], count int) (func(), error) {
	keys := make([]K, count)
	inners := make([]map[UK]UV, count)
	for i := range count {
		var err error
		if keys[i], err = r.key(); err != nil {
			return nil, err
		}
		n, err := r.Count()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, format.CorruptBlob("empty map for a key")
		}
		inner := make(map[UK]UV, n)
		for range n {
			uk, err := readValue(r, s.keyCodec)
			if err != nil {
				return nil, err
			}
			if _, _, err := r.expiry(); err != nil { // a state that had a TTL
				return nil, err
			}
			if inner[uk], err = readValue(r, s.valueCodec); err != nil {
				return nil, err
			}
		}
		inners[i] = inner
	}
	return func() {
		for i, k := range keys {
			s.m[k] = inners[i]
		}
	}, nil
}
