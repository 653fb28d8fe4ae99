package state

import (
	"bytes"
	"iter"

	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// diskMaps keeps a map state's maps in the Pebble backend's database, one
// database entry per map entry: the key's database key followed by the
// user key's encoding, holding the user value's encoding.
type diskMaps[K comparable, UK comparable, UV any] struct {
	t          diskTable[K]
	keyCodec   Codec[UK]
	valueCodec Codec[UV]
	encKey     func([]byte, UK) ([]byte, error)
	encValue   func([]byte, UV) ([]byte, error)
	ukBuf      []byte
}

func newDiskMaps[K comparable, UK comparable, UV any](t diskTable[K], keyCodec Codec[UK], valueCodec Codec[UV]) *diskMaps[K, UK, UV] {
	return &diskMaps[K, UK, UV]{t: t, keyCodec: keyCodec, valueCodec: valueCodec,
		encKey: appendFunc(keyCodec), encValue: appendFunc(valueCodec)}
}

// entryKey returns the database key of uk in the current key's map.
func (s *diskMaps[K, UK, UV]) entryKey(uk UK) []byte {
	var err error
	if s.ukBuf, err = s.encKey(s.ukBuf[:0], uk); err != nil {
		s.t.d.fail("encoding a map key", err)
	}
	return s.t.key(s.ukBuf)
}

func (s *diskMaps[K, UK, UV]) get(uk UK) (UV, bool) {
	var v UV
	found := s.t.d.get(s.entryKey(uk), func(raw []byte) (err error) {
		v, err = s.valueCodec.Decode(raw)
		return err
	})
	return v, found
}

func (s *diskMaps[K, UK, UV]) put(uk UK, uv UV) {
	d := s.t.d
	key := s.entryKey(uk)
	var err error
	if d.val, err = s.encValue(d.val[:0], uv); err != nil {
		d.fail("encoding a map value", err)
	}
	d.set(key, d.val)
}

func (s *diskMaps[K, UK, UV]) compute(uk UK, f func(old UV, ok bool) UV) UV {
	v := f(s.get(uk))
	s.put(uk, v)
	return v
}

func (s *diskMaps[K, UK, UV]) remove(uk UK) { s.t.d.delete(s.entryKey(uk)) }

func (s *diskMaps[K, UK, UV]) contains(uk UK) bool {
	return s.t.d.get(s.entryKey(uk), func([]byte) error { return nil })
}

func (s *diskMaps[K, UK, UV]) len() int {
	n := 0
	s.t.d.scan(s.t.key(nil), func(_, _ []byte) bool {
		n++
		return true
	})
	return n
}

func (s *diskMaps[K, UK, UV]) all() iter.Seq2[UK, UV] {
	prefix := bytes.Clone(s.t.key(nil))
	return func(yield func(UK, UV) bool) {
		s.t.d.scan(prefix, func(key, value []byte) bool {
			uk, err := s.keyCodec.Decode(key[len(prefix):])
			if err != nil {
				s.t.d.fail("decoding a stored map key", err)
			}
			uv, err := s.valueCodec.Decode(value)
			if err != nil {
				s.t.d.fail("decoding a stored map value", err)
			}
			return yield(uk, uv)
		})
	}
}

func (s *diskMaps[K, UK, UV]) clear() { s.t.d.deletePrefix(s.t.key(nil)) }

func (s *diskMaps[K, UK, UV]) kind() stateKind { return kindMap }

// capture captures nothing: Snapshot's view of the database holds the state.
func (s *diskMaps[K, UK, UV]) capture() capturedTable[K] { return diskMapCapture[K]{s.t} }

type diskMapCapture[K comparable] struct{ t diskTable[K] }

// encode writes entries: key, entry count, then user key and value per
// entry. A key's entries are adjacent in the database.
func (c diskMapCapture[K]) encode(w *sectionWriter[K]) error {
	var (
		key     []byte // the key whose entries are in pairs
		keyKG   int
		pairs   []byte // user key and value of each entry, length-prefixed
		entries int
	)
	flush := func() {
		if entries > 0 {
			i := w.encodedKey(keyKG, key)
			w.putCount(i, entries)
			w.putFramed(i, pairs)
		}
		pairs, entries = pairs[:0], 0
	}
	err := c.t.scanView(w.disk, w.owned, func(kg int, k, userKey, value []byte) error {
		if entries > 0 && (kg != keyKG || !bytes.Equal(k, key)) {
			flush()
		}
		if entries == 0 {
			key, keyKG = append(key[:0], k...), kg
		}
		pairs = format.AppendBytes(format.AppendBytes(pairs, userKey), value)
		entries++
		return nil
	})
	flush()
	return err
}

func (s *diskMaps[K, UK, UV]) stage(r *sectionReader[K], count int) (func(), error) {
	var prefix, dbKey []byte
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
			return nil, format.CorruptBlob("empty map for a key")
		}
		// The blob's map replaces the key's map, as in the heap backend.
		prefix = s.t.keyIn(prefix[:0], r.kg, key)
		if err := r.disk.DeleteRange(prefix, kv.PrefixEnd(prefix), nil); err != nil {
			return nil, err
		}
		for range n {
			_, uk, err := readEncoded(r, s.keyCodec)
			if err != nil {
				return nil, err
			}
			_, uv, err := readEncoded(r, s.valueCodec)
			if err != nil {
				return nil, err
			}
			dbKey = append(append(dbKey[:0], prefix...), uk...)
			if err := r.disk.Set(dbKey, uv, nil); err != nil {
				return nil, err
			}
		}
	}
	return func() {}, nil
}
