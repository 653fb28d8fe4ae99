package state

import (
	"iter"
	"maps"
	"slices"

	"github.com/exactlyonce/exactly/internal/format"
)

// heapLists keeps a list state's lists in a Go map of slices.
//
// Snapshot captures only the slice headers, which is safe because the stored slices are
// append-only: no method writes an element below a stored slice's length (add appends,
// update stores a fresh copy), so a captured header always sees the elements it had.
// Keep that invariant when adding methods.
type heapLists[K comparable, V any] struct {
	b     *KeyedBackend[K]
	codec Codec[V]
	m     map[K][]V // slices are never empty
}

func newHeapLists[K comparable, V any](b *KeyedBackend[K], codec Codec[V]) *heapLists[K, V] {
	return &heapLists[K, V]{b: b, codec: codec, m: make(map[K][]V)}
}

func (s *heapLists[K, V]) get() []V { return slices.Clone(s.m[s.b.current]) }

func (s *heapLists[K, V]) all() iter.Seq[V] { return slices.Values(s.m[s.b.current]) }

func (s *heapLists[K, V]) len() int { return len(s.m[s.b.current]) }

func (s *heapLists[K, V]) add(v V) { s.m[s.b.current] = append(s.m[s.b.current], v) }

// update stores a copy of vs, which is not empty.
func (s *heapLists[K, V]) update(vs []V) { s.m[s.b.current] = slices.Clone(vs) }

func (s *heapLists[K, V]) clear() { delete(s.m, s.b.current) }

func (s *heapLists[K, V]) kind() stateKind { return kindList }

func (s *heapLists[K, V]) capture() capturedTable[K] {
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
		i, in, err := w.key(k)
		if err != nil {
			return err
		}
		if !in {
			continue
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

func (s *heapLists[K, V]) stage(r *sectionReader[K], count int) (func(), error) {
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
			if _, _, err := r.expiry(); err != nil { // a state that had a TTL
				return nil, err
			}
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
