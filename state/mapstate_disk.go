package state

import (
	"bytes"
	"iter"

	"github.com/cockroachdb/pebble/v2"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// diskMaps keeps a map state's maps in the Pebble backend's database, one
// database entry per map entry: the key's database key followed by the
// user key's encoding, holding the user value's encoding (with a TTL,
// after the entry's expiry).
type diskMaps[K comparable, UK comparable, UV any] struct {
	t          diskTable[K]
	keyCodec   Codec[UK]
	valueCodec Codec[UV]
	encKey     func([]byte, UK) ([]byte, error)
	encValue   func([]byte, UV) ([]byte, error)
	ttl        *ttlConfig // nil without a TTL
	ukBuf      []byte
}

func newDiskMaps[K comparable, UK comparable, UV any](t diskTable[K], keyCodec Codec[UK], valueCodec Codec[UV], ttl *ttlConfig) *diskMaps[K, UK, UV] {
	return &diskMaps[K, UK, UV]{t: t, keyCodec: keyCodec, valueCodec: valueCodec,
		encKey: appendFunc(keyCodec), encValue: appendFunc(valueCodec), ttl: ttl}
}

// entryKey returns the database key of uk in the current key's map.
func (s *diskMaps[K, UK, UV]) entryKey(uk UK) []byte {
	var err error
	if s.ukBuf, err = s.encKey(s.ukBuf[:0], uk); err != nil {
		s.t.d.fail("encoding a map key", err)
	}
	return s.t.key(s.ukBuf)
}

func (s *diskMaps[K, UK, UV]) get(uk UK) (UV, bool) { return s.lookup(uk, true) }

// lookup returns the value of uk in the current key's map. With a TTL it
// deletes an expired entry and, if renew is set and reads renew, renews
// the entry.
func (s *diskMaps[K, UK, UV]) lookup(uk UK, renew bool) (UV, bool) {
	var v UV
	d := s.t.d
	key := s.entryKey(uk)
	renew = renew && s.ttl != nil && s.ttl.onRead
	expired := false
	found := d.get(key, func(raw []byte) (err error) {
		if s.ttl != nil {
			var exp int64
			if exp, raw, err = splitExpiry(raw); err != nil {
				return err
			}
			if expired = s.ttl.expired(exp); expired {
				return nil
			}
			if renew {
				d.val = append(format.AppendInt64(d.val[:0], s.ttl.stamp()), raw...)
			}
		}
		v, err = s.valueCodec.Decode(raw)
		return err
	})
	switch {
	case !found:
		return v, false
	case expired:
		d.delete(key)
		var zero UV
		return zero, false
	case renew:
		d.set(key, d.val)
	}
	return v, true
}

func (s *diskMaps[K, UK, UV]) put(uk UK, uv UV) {
	d := s.t.d
	key := s.entryKey(uk)
	d.val = d.val[:0]
	if s.ttl != nil {
		d.val = format.AppendInt64(d.val, s.ttl.stamp())
	}
	var err error
	if d.val, err = s.encValue(d.val, uv); err != nil {
		d.fail("encoding a map value", err)
	}
	d.set(key, d.val)
}

func (s *diskMaps[K, UK, UV]) compute(uk UK, f func(old UV, ok bool) UV) UV {
	v := f(s.lookup(uk, false))
	s.put(uk, v)
	return v
}

func (s *diskMaps[K, UK, UV]) remove(uk UK) { s.t.d.delete(s.entryKey(uk)) }

func (s *diskMaps[K, UK, UV]) contains(uk UK) bool {
	if s.ttl != nil {
		_, ok := s.lookup(uk, true)
		return ok
	}
	return s.t.d.get(s.entryKey(uk), func([]byte) error { return nil })
}

func (s *diskMaps[K, UK, UV]) len() int {
	n := 0
	s.t.d.scan(s.t.key(nil), func(_, value []byte) bool {
		if s.ttl != nil {
			exp, _, err := splitExpiry(value)
			if err != nil {
				s.t.d.fail("reading a stored map value", err)
			}
			if s.ttl.expired(exp) {
				return true
			}
		}
		n++
		return true
	})
	return n
}

// all produces the entries of the map; with a TTL it deletes the expired
// ones, and renews those it produces if reads renew.
func (s *diskMaps[K, UK, UV]) all() iter.Seq2[UK, UV] {
	prefix := bytes.Clone(s.t.key(nil))
	return func(yield func(UK, UV) bool) {
		d := s.t.d
		d.scan(prefix, func(key, value []byte) bool {
			if s.ttl != nil {
				exp, v, err := splitExpiry(value)
				if err != nil {
					d.fail("reading a stored map value", err)
				}
				if s.ttl.expired(exp) {
					d.delete(key)
					return true
				}
				value = v
			}
			uk, err := s.keyCodec.Decode(key[len(prefix):])
			if err != nil {
				d.fail("decoding a stored map key", err)
			}
			uv, err := s.valueCodec.Decode(value)
			if err != nil {
				d.fail("decoding a stored map value", err)
			}
			if s.ttl != nil && s.ttl.onRead {
				d.val = append(format.AppendInt64(d.val[:0], s.ttl.stamp()), value...)
				d.set(key, d.val)
			}
			return yield(uk, uv)
		})
	}
}

func (s *diskMaps[K, UK, UV]) clear() { s.t.d.deletePrefix(s.t.key(nil)) }

func (s *diskMaps[K, UK, UV]) kind() stateKind {
	if s.ttl != nil {
		return kindMap | kindTTL
	}
	return kindMap
}

// capture captures nothing: Snapshot's view of the database holds the state.
func (s *diskMaps[K, UK, UV]) capture() capturedTable[K] {
	return diskMapCapture[K]{newDiskCapture(s.t, s.ttl)}
}

type diskMapCapture[K comparable] struct{ diskCapture[K] }

// encode writes entries: key, entry count, then user key and value per
// entry (with a TTL: user key, expiry, value, leaving out the entries
// expired at the capture). A key's entries are adjacent in the database.
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
		exp := int64(0)
		if c.ttl {
			var err error
			if exp, value, err = splitExpiry(value); err != nil || expiredAt(exp, c.cutoff) {
				return err
			}
		}
		if entries > 0 && (kg != keyKG || !bytes.Equal(k, key)) {
			flush()
		}
		if entries == 0 {
			key, keyKG = append(key[:0], k...), kg
		}
		pairs = format.AppendBytes(pairs, userKey)
		if c.ttl {
			pairs = format.AppendInt64(pairs, exp)
		}
		pairs = format.AppendBytes(pairs, value)
		entries++
		return nil
	})
	flush()
	return err
}

func (s *diskMaps[K, UK, UV]) stage(r *sectionReader[K], count int) (func(), error) {
	var prefix, dbKey, dbValue []byte
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
			exp, err := diskRestoredExpiry(r, s.ttl)
			if err != nil {
				return nil, err
			}
			_, uv, err := readEncoded(r, s.valueCodec)
			if err != nil {
				return nil, err
			}
			if s.ttl != nil {
				dbValue = append(format.AppendInt64(dbValue[:0], exp), uv...)
				uv = dbValue
			}
			dbKey = append(append(dbKey[:0], prefix...), uk...)
			if err := r.disk.Set(dbKey, uv, nil); err != nil {
				return nil, err
			}
		}
	}
	return func() {}, nil
}

func (s *diskMaps[K, UK, UV]) ttlDomain() TTLTime { return s.ttl.domain }

func (s *diskMaps[K, UK, UV]) cutoff() int64 { return s.ttl.now() }

func (s *diskMaps[K, UK, UV]) restamp() {
	s.t.rewrite(func(value []byte) ([]byte, bool, error) { return restampValue(s.ttl, value) })
}

func (s *diskMaps[K, UK, UV]) sweepEntry(key, value []byte, b *pebble.Batch) error {
	return sweepStamped(s.ttl, key, value, b)
}
