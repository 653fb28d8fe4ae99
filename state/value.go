package state

import "maps"

// ValueState holds one value of type V per key.
//
// Values are captured shallowly by Snapshot: if V is or holds a pointer, slice or map,
// do not mutate a value after passing it to Update; store a new one instead.
type ValueState[K comparable, V any] struct {
	b     *KeyedBackend[K]
	codec Codec[V]
	m     map[K]V
}

// NewValueState registers a value state called name with b. It fails if the name is
// empty or already registered.
func NewValueState[K comparable, V any](scope Scope[K], name string, codec Codec[V]) (*ValueState[K, V], error) {
	b := scope.b
	s := &ValueState[K, V]{b: b, codec: codec, m: make(map[K]V)}
	if err := b.register(name, s); err != nil {
		return nil, err
	}
	return s, nil
}

// Value returns the current key's value and whether it has one.
func (s *ValueState[K, V]) Value() (V, bool) {
	v, ok := s.m[s.b.current]
	return v, ok
}

// Update sets the current key's value.
func (s *ValueState[K, V]) Update(v V) { s.m[s.b.current] = v }

// Clear removes the current key's value.
func (s *ValueState[K, V]) Clear() { delete(s.m, s.b.current) }

func (s *ValueState[K, V]) kind() stateKind { return kindValue }

func (s *ValueState[K, V]) capture() capturedTable[K] {
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

func (s *ValueState[K, V]) stage(r *sectionReader[K], count int) (func(), error) {
	keys := make([]K, count)
	vals := make([]V, count)
	for i := range count {
		var err error
		if keys[i], err = r.key(); err != nil {
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
