package state

import (
	"bytes"
	"encoding/binary"
	"errors"
	"iter"

	"github.com/cockroachdb/pebble/v2"
	"github.com/exactlyonce/exactly/internal/format"
)

// diskLists keeps a list state's lists in the Pebble backend's database,
// one database entry per key holding the elements' encodings, each
// length-prefixed (uvarint), as in the blob format; with a TTL each
// element's expiry (8 bytes, big-endian) comes before its length, as in
// the blob format too. Add appends with a Pebble merge, without reading
// the list.
type diskLists[K comparable, V any] struct {
	t     diskTable[K]
	codec Codec[V]
	enc   func([]byte, V) ([]byte, error)
	ttl   *ttlConfig // nil without a TTL
	elem  []byte     // scratch for an element's encoding
}

func newDiskLists[K comparable, V any](t diskTable[K], codec Codec[V], ttl *ttlConfig) *diskLists[K, V] {
	return &diskLists[K, V]{t: t, codec: codec, enc: appendFunc(codec), ttl: ttl}
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

// nextStamped splits the first element off framed, a sequence of
// elements each with its expiry; exp is 0 without a TTL. whole is the
// element's framing, expiry included.
func nextStamped(ttl bool, framed []byte) (exp int64, elem, whole, rest []byte, err error) {
	rest = framed
	if ttl {
		if exp, rest, err = splitExpiry(rest); err != nil {
			return 0, nil, nil, nil, errBadList
		}
	}
	if elem, rest, err = nextElement(rest); err != nil {
		return 0, nil, nil, nil, err
	}
	return exp, elem, framed[:len(framed)-len(rest)], rest, nil
}

// countElements returns the number of elements of framed, leaving out
// those expired at cutoff when they carry expiries (ttl).
func countElements(ttl bool, framed []byte, cutoff int64) (n, expired int, err error) {
	for len(framed) > 0 {
		var exp int64
		if exp, _, _, framed, err = nextStamped(ttl, framed); err != nil {
			return 0, 0, err
		}
		if ttl && expiredAt(exp, cutoff) {
			expired++
		} else {
			n++
		}
	}
	return n, expired, nil
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

// live returns a copy of the current key's stored list. With a TTL it
// writes the list back without its expired elements if it has any, and
// with every element renewed if reads renew.
func (s *diskLists[K, V]) live() []byte {
	framed := s.framed()
	if s.ttl == nil || len(framed) == 0 {
		return framed
	}
	_, expired, err := countElements(true, framed, s.ttl.now())
	if err != nil {
		s.t.d.fail("reading a list", err)
	}
	if expired == 0 && !s.ttl.onRead {
		return framed
	}
	var exp int64
	if s.ttl.onRead {
		exp = s.ttl.stamp()
	}
	var out []byte
	for rest := framed; len(rest) > 0; {
		e, elem, whole, r, err := nextStamped(true, rest)
		if err != nil {
			s.t.d.fail("reading a list", err)
		}
		rest = r
		switch {
		case s.ttl.expired(e):
		case s.ttl.onRead:
			out = format.AppendBytes(format.AppendInt64(out, exp), elem)
		default:
			out = append(out, whole...)
		}
	}
	if len(out) == 0 {
		s.t.d.delete(s.t.key(nil))
	} else {
		s.t.d.set(s.t.key(nil), out)
	}
	return out
}

func (s *diskLists[K, V]) get() []V { return s.decode(s.live()) }

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
			_, elem, _, r, err := nextStamped(s.ttl != nil, rest)
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

func (s *diskLists[K, V]) all() iter.Seq[V] { return s.elements(s.live()) }

func (s *diskLists[K, V]) len() int {
	var n int
	s.t.d.get(s.t.key(nil), func(raw []byte) (err error) {
		cutoff := int64(noTime)
		if s.ttl != nil {
			cutoff = s.ttl.now()
		}
		n, _, err = countElements(s.ttl != nil, raw, cutoff)
		return err
	})
	return n
}

// appendFramed appends the framing of v, with the expiry exp if the state
// has a TTL, to d.val.
func (s *diskLists[K, V]) appendFramed(v V, exp int64) {
	d := s.t.d
	var err error
	if s.elem, err = s.enc(s.elem[:0], v); err != nil {
		d.fail("encoding a list element", err)
	}
	if s.ttl != nil {
		d.val = format.AppendInt64(d.val, exp)
	}
	d.val = format.AppendBytes(d.val, s.elem)
}

// stamp returns the expiry of an element written now; 0 without a TTL.
func (s *diskLists[K, V]) stamp() int64 {
	if s.ttl == nil {
		return 0
	}
	return s.ttl.stamp()
}

func (s *diskLists[K, V]) add(v V) {
	s.t.d.val = s.t.d.val[:0]
	s.appendFramed(v, s.stamp())
	s.t.d.append(s.t.key(nil), s.t.d.val)
}

// update stores vs, which is not empty.
func (s *diskLists[K, V]) update(vs []V) {
	s.t.d.val = s.t.d.val[:0]
	exp := s.stamp()
	for _, v := range vs {
		s.appendFramed(v, exp)
	}
	s.t.d.set(s.t.key(nil), s.t.d.val)
}

func (s *diskLists[K, V]) clear() { s.t.d.delete(s.t.key(nil)) }

func (s *diskLists[K, V]) kind() stateKind {
	if s.ttl != nil {
		return kindList | kindTTL
	}
	return kindList
}

// capture captures nothing: Snapshot's view of the database holds the state.
func (s *diskLists[K, V]) capture() capturedTable[K] {
	return diskListCapture[K]{newDiskCapture(s.t, s.ttl)}
}

type diskListCapture[K comparable] struct{ diskCapture[K] }

// encode writes entries: key, element count, elements; the stored list is
// already the elements' framing. With a TTL the elements expired at the
// capture are left out.
func (c diskListCapture[K]) encode(w *sectionWriter[K]) error {
	var live []byte
	return c.t.scanView(w.disk, w.owned, func(kg int, key, _, framed []byte) error {
		n, expired, err := countElements(c.ttl, framed, c.cutoff)
		if err != nil || n == 0 {
			return err
		}
		if expired > 0 {
			live = live[:0]
			for rest := framed; len(rest) > 0; {
				exp, _, whole, r, err := nextStamped(true, rest)
				if err != nil {
					return err
				}
				if !expiredAt(exp, c.cutoff) {
					live = append(live, whole...)
				}
				rest = r
			}
			framed = live
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
			exp, err := diskRestoredExpiry(r, s.ttl)
			if err != nil {
				return nil, err
			}
			_, elem, err := readEncoded(r, s.codec)
			if err != nil {
				return nil, err
			}
			if s.ttl != nil {
				framed = format.AppendInt64(framed, exp)
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

func (s *diskLists[K, V]) ttlDomain() TTLTime { return s.ttl.domain }

func (s *diskLists[K, V]) cutoff() int64 { return s.ttl.now() }

// restamp gives the elements written while the clock had no time the
// expiry of an element written now.
func (s *diskLists[K, V]) restamp() {
	s.t.rewrite(func(framed []byte) ([]byte, bool, error) {
		var out []byte
		changed := false
		for rest := framed; len(rest) > 0; {
			exp, elem, whole, r, err := nextStamped(true, rest)
			if err != nil {
				return nil, false, err
			}
			rest = r
			if exp == unstamped {
				out = format.AppendBytes(format.AppendInt64(out, s.ttl.stamp()), elem)
				changed = true
			} else {
				out = append(out, whole...)
			}
		}
		return out, changed, nil
	})
}

// sweepEntry writes the list back without its expired elements, if it has
// any.
func (s *diskLists[K, V]) sweepEntry(key, framed []byte, b *pebble.Batch) error {
	n, expired, err := countElements(true, framed, s.ttl.now())
	if err != nil || expired == 0 {
		return err
	}
	if n == 0 {
		return b.Delete(key, nil)
	}
	var live []byte
	for rest := framed; len(rest) > 0; {
		exp, _, whole, r, err := nextStamped(true, rest)
		if err != nil {
			return err
		}
		if !s.ttl.expired(exp) {
			live = append(live, whole...)
		}
		rest = r
	}
	return b.Set(key, live, nil)
}
