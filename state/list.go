package state

import (
	"iter"
	"maps"
	"slices"

	"github.com/exactlyonce/exactly/internal/format"
)

// ListState holds a list of V per key.
//
// Snapshot captures only the slice headers, which is safe because the stored slices are
// append-only: no method writes an element below a stored slice's length (Add appends,
// Update stores a fresh copy), so a captured header always sees the elements it had.
// Keep that invariant when adding methods. Elements are captured shallowly, as in
// ValueState.
type ListState[K comparable, V any] struct {
	b     *KeyedBackend[K]
	codec Codec[V]
	m     map[K][]V // slices are never empty
}

// NewListState registers a list state called name with b. It fails if the name is empty
// or already registered.
func NewListState[K comparable, V any](scope Scope[K], name string, codec Codec[V]) (*ListState[K, V], error) {
	b := scope.b
	s := &ListState[K, V]{b: b, codec: codec, m: make(map[K][]V)}
	if err := b.register(name, s); err != nil {
		return nil, err
	}
	return s, nil
}

// Get returns a copy of the current key's list, nil if it is empty. Use All to read
// without copying.
func (s *ListState[K, V]) Get() []V { return slices.Clone(s.m[s.b.current]) }

// All returns an iterator over the list of the key that is current when All is called.
func (s *ListState[K, V]) All() iter.Seq[V] { return slices.Values(s.m[s.b.current]) }

// Len returns the length of the current key's list.
func (s *ListState[K, V]) Len() int { return len(s.m[s.b.current]) }

// Add appends v to the current key's list.
func (s *ListState[K, V]) Add(v V) { s.m[s.b.current] = append(s.m[s.b.current], v) }

// Update replaces the current key's list with a copy of vs; an empty vs clears it.
func (s *ListState[K, V]) Update(vs []V) {
	if len(vs) == 0 {
		s.Clear()
		return
	}
	s.m[s.b.current] = slices.Clone(vs)
}

// Clear removes the current key's list.
func (s *ListState[K, V]) Clear() { delete(s.m, s.b.current) }

func (s *ListState[K, V]) kind() stateKind { return kindList }

func (s *ListState[K, V]) capture() capturedTable[K] {
	return listCapture[K, V]{m: maps.Clone(s.m), codec: s.codec}
}

type listCapture[K comparable, V any] struct {
	m     map[K][]V
	codec Codec[V]
}

// encode writes entries: key, element count, elements.
func (c listCapture[K, V]) encode(w *sectionWriter[K]) error {
	enc := appendFunc(c.codec)
	for k, vs := range c.m {
		i, err := w.key(k)
		if err != nil {
			return err
		}
		w.putCount(i, len(vs))
		for _, v := range vs {
			if err := putValue(w, i, enc, v); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *ListState[K, V]) stage(r *sectionReader[K], count int) (func(), error) {
	keys := make([]K, count)
	lists := make([][]V, count)
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
			return nil, format.CorruptBlob("empty list for a key")
		}
		vs := make([]V, n)
		for j := range vs {
			if vs[j], err = readValue(r, s.codec); err != nil {
				return nil, err
			}
		}
		lists[i] = vs
	}
	return func() {
		for i, k := range keys {
			s.m[k] = lists[i]
		}
	}, nil
}
