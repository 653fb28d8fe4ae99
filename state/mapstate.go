package state

import (
	"iter"
	"maps"

	"github.com/exactlyonce/exactly/internal/format"
)

// MapState holds a map from UK to UV per key.
//
// Entries are captured shallowly by Snapshot: if UV is or holds a pointer, slice or map,
// do not mutate a value after passing it to Put.
type MapState[K comparable, UK comparable, UV any] struct {
	b          *KeyedBackend[K]
	keyCodec   Codec[UK]
	valueCodec Codec[UV]
	m          map[K]map[UK]UV // inner maps are never empty
}

// NewMapState registers a map state called name with b. It fails if the name is empty
// or already registered.
func NewMapState[K comparable, UK comparable, UV any](scope Scope[K], name string, keyCodec Codec[UK], valueCodec Codec[UV]) (*MapState[K, UK, UV], error) {
	b := scope.b
	s := &MapState[K, UK, UV]{b: b, keyCodec: keyCodec, valueCodec: valueCodec, m: make(map[K]map[UK]UV)}
	if err := b.register(name, s); err != nil {
		return nil, err
	}
	return s, nil
}

// Get returns the value of uk in the current key's map and whether it is present.
func (s *MapState[K, UK, UV]) Get(uk UK) (UV, bool) {
	v, ok := s.m[s.b.current][uk]
	return v, ok
}

// Put sets the value of uk in the current key's map.
func (s *MapState[K, UK, UV]) Put(uk UK, uv UV) {
	inner, ok := s.m[s.b.current]
	if !ok {
		inner = make(map[UK]UV)
		s.m[s.b.current] = inner
	}
	inner[uk] = uv
}

// Compute sets uk's value in the current key's map to what f returns, given
// the current value and whether uk is present, and returns it. It finds the
// current key's map once where Get and Put find it twice. f must not use s.
func (s *MapState[K, UK, UV]) Compute(uk UK, f func(old UV, ok bool) UV) UV {
	inner, ok := s.m[s.b.current]
	if !ok {
		inner = make(map[UK]UV)
		s.m[s.b.current] = inner
	}
	old, ok := inner[uk]
	v := f(old, ok)
	inner[uk] = v
	return v
}

// Remove deletes uk from the current key's map.
func (s *MapState[K, UK, UV]) Remove(uk UK) {
	inner, ok := s.m[s.b.current]
	if !ok {
		return
	}
	delete(inner, uk)
	if len(inner) == 0 {
		delete(s.m, s.b.current)
	}
}

// Contains reports whether uk is in the current key's map.
func (s *MapState[K, UK, UV]) Contains(uk UK) bool {
	_, ok := s.m[s.b.current][uk]
	return ok
}

// Len returns the number of entries in the current key's map.
func (s *MapState[K, UK, UV]) Len() int { return len(s.m[s.b.current]) }

// All returns an iterator over the map of the key that is current when All is called,
// in unspecified order. The map may be modified during iteration with the usual Go map
// semantics.
func (s *MapState[K, UK, UV]) All() iter.Seq2[UK, UV] { return maps.All(s.m[s.b.current]) }

// Clear removes the current key's whole map.
func (s *MapState[K, UK, UV]) Clear() { delete(s.m, s.b.current) }

func (s *MapState[K, UK, UV]) kind() stateKind { return kindMap }

func (s *MapState[K, UK, UV]) capture() capturedTable[K] {
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
		i, err := w.key(k)
		if err != nil {
			return err
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

func (s *MapState[K, UK, UV]) stage(r *sectionReader[K], count int) (func(), error) {
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
