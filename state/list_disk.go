package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"iter"

	"github.com/exactlyonce/exactly/internal/format"
)

// diskLists keeps a list state's lists in the Pebble backend's database,
// one database entry per key holding the elements' encodings, each
// length-prefixed (uvarint), as in the blob format. Add appends with a
// Pebble merge, without reading the list.
type diskLists[K comparable, V any] struct {
	t     diskTable[K]
	codec Codec[V]
	enc   func([]byte, V) ([]byte, error)
	elem  []byte // scratch for an element's encoding
}

func newDiskLists[K comparable, V any](t diskTable[K], codec Codec[V]) *diskLists[K, V] {
	return &diskLists[K, V]{t: t, codec: codec, enc: appendFunc(codec)}
}

// errBadList reports a stored list that is not a sequence of
// length-prefixed elements.
var errBadList = errors.New("a stored list is not a sequence of length-prefixed elements")

// nextElement splits the first element off framed, a sequence of
// length-prefixed elements.
func nextElement(framed []byte) (elem, rest []byte, err error) {
	n, w := binary.Uvarint(framed)
	if w <= 0 || uint64(len(framed)-w) < n {
		return nil, nil, errBadList
	}
	return framed[w : w+int(n)], framed[w+int(n):], nil
}

// countElements returns the number of elements of framed.
func countElements(framed []byte) (int, error) {
	n := 0
	for len(framed) > 0 {
		var err error
		if _, framed, err = nextElement(framed); err != nil {
			return 0, err
		}
		n++
	}
	return n, nil
}

// framed returns a copy of the current key's stored list, nil if it has
// none.
func (s *diskLists[K, V]) framed() []byte {
	var framed []byte
	s.t.d.get(s.t.key(nil), func(raw []byte) error {
		framed = bytes.Clone(raw)
		return nil
	})
	return framed
}

func (s *diskLists[K, V]) get() []V { return s.decode(s.framed()) }

// decode decodes every element of framed; nil if there are none.
func (s *diskLists[K, V]) decode(framed []byte) []V {
	var vs []V
	for v := range s.elements(framed) {
		vs = append(vs, v)
	}
	return vs
}

// elements iterates over the decoded elements of framed.
func (s *diskLists[K, V]) elements(framed []byte) iter.Seq[V] {
	return func(yield func(V) bool) {
		for rest := framed; len(rest) > 0; {
			elem, r, err := nextElement(rest)
			if err != nil {
				s.t.d.fail("reading a list", err)
			}
			v, err := s.codec.Decode(elem)
			if err != nil {
				s.t.d.fail("decoding a stored list element", err)
			}
			if !yield(v) {
				return
			}
			rest = r
		}
	}
}

func (s *diskLists[K, V]) all() iter.Seq[V] { return s.elements(s.framed()) }

func (s *diskLists[K, V]) len() int {
	var n int
	s.t.d.get(s.t.key(nil), func(raw []byte) (err error) {
		n, err = countElements(raw)
		return err
	})
	return n
}

// appendFramed appends the length-prefixed encoding of v to d.val.
func (s *diskLists[K, V]) appendFramed(v V) {
	d := s.t.d
	var err error
	if s.elem, err = s.enc(s.elem[:0], v); err != nil {
		d.fail("encoding a list element", err)
	}
	d.val = format.AppendBytes(d.val, s.elem)
}

func (s *diskLists[K, V]) add(v V) {
	s.t.d.val = s.t.d.val[:0]
	s.appendFramed(v)
	s.t.d.append(s.t.key(nil), s.t.d.val)
}

// update stores vs, which is not empty.
func (s *diskLists[K, V]) update(vs []V) {
	s.t.d.val = s.t.d.val[:0]
	for _, v := range vs {
		s.appendFramed(v)
	}
	s.t.d.set(s.t.key(nil), s.t.d.val)
}

func (s *diskLists[K, V]) clear() { s.t.d.delete(s.t.key(nil)) }

func (s *diskLists[K, V]) kind() stateKind { return kindList }

// capture captures nothing: Snapshot's view of the database holds the state.
func (s *diskLists[K, V]) capture() capturedTable[K] { return diskListCapture[K]{s.t} }

type diskListCapture[K comparable] struct{ t diskTable[K] }

// encode writes entries: key, element count, elements; the stored list is
// already the elements' framing.
func (c diskListCapture[K]) encode(w *sectionWriter[K]) error {
	return c.t.scanView(w.disk, w.owned, func(kg int, key, _, framed []byte) error {
		n, err := countElements(framed)
		if err != nil {
			return err
		}
		i := w.encodedKey(kg, key)
		w.putCount(i, n)
		w.putFramed(i, framed)
		return nil
	})
}

func (s *diskLists[K, V]) stage(r *sectionReader[K], count int) (func(), error) {
	var dbKey, framed []byte
	for range count {
		_, key, err := r.encodedKey()
		if err != nil {
			return nil, err
		}
		n, err := r.Count()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, format.CorruptBlob("empty list for a key")
		}
		framed = framed[:0]
		for range n {
			_, elem, err := readEncoded(r, s.codec)
			if err != nil {
				return nil, err
			}
			framed = format.AppendBytes(framed, elem)
		}
		dbKey = s.t.keyIn(dbKey[:0], r.kg, key)
		if err := r.disk.Set(dbKey, framed, nil); err != nil {
			return nil, err
		}
	}
	return func() {}, nil
}
