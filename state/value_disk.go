package state

import (
	"math"
	"unsafe"

	"github.com/cockroachdb/pebble/v2"
	"github.com/exactlyonce/exactly/internal/format"
)

// diskValues keeps a value state's values in the Pebble backend's database,
// one database entry per key holding the value's encoding, behind a
// write-back cache of decoded values: reading a key read or written since
// the last write-back, or writing it, touches no database (two map
// operations instead of a Pebble read and write per record). The changes
// are written back in one batch at every snapshot (capture, before the
// backend takes its view of the database), and those of the entries that
// leave the cache when the value caches of the subtask exceed their share
// of the memory budget (see valueCache): each cache then drops half of
// what it holds.
//
// With a TTL, the database entry holds the expiry (8 bytes, big-endian)
// before the value's encoding, and the cache the expiry and the encoding
// of every value it read.
type diskValues[K comparable, V any] struct {
	t     diskTable[K]
	codec Codec[V]
	enc   func([]byte, V) ([]byte, error)
	ttl   *ttlConfig // nil without a TTL
	cache map[K]*cachedValue[V]
	bytes int64  // the cost of the entries of cache (see cachedValue.cost)
	dirty int    // entries of cache changed since the last write-back
	buf   []byte // scratch for a database value with an expiry
}

// cachedValue is a key's value as the state holds it: v and its encoding
// raw (when ok), or no value (a cleared or absent key).
type cachedValue[V any] struct {
	v     V
	raw   []byte
	exp   int64 // the expiry, with a TTL
	ok    bool
	dirty bool // changed since the last write-back
	// base is the entry's fixed cost: its key's database key, the entry
	// and its slot in the map; cost adds the size of v's encoding (the
	// estimate of v's) and raw's capacity.
	base, cost int64
}

// cacheSlotBytes is what a map slot costs beyond its key and value
// pointer: Go's maps keep a control byte and spare slots.
const cacheSlotBytes = 16

func newDiskValues[K comparable, V any](t diskTable[K], codec Codec[V], ttl *ttlConfig) *diskValues[K, V] {
	return &diskValues[K, V]{t: t, codec: codec, enc: appendFunc(codec), ttl: ttl, cache: map[K]*cachedValue[V]{}}
}

// entry returns the current key's cache entry, reading the database on a
// miss. A miss first halves every value cache of the subtask if they used
// up their budget.
func (s *diskValues[K, V]) entry() *cachedValue[V] {
	k := s.t.d.b.current
	if e, ok := s.cache[k]; ok {
		return e
	}
	if s.t.d.values.full() {
		s.t.d.b.halveValueCaches()
	}
	key := s.t.key(nil)
	e := &cachedValue[V]{}
	e.base = int64(len(key)) + int64(unsafe.Sizeof(k)+unsafe.Sizeof(e)+unsafe.Sizeof(*e)) + cacheSlotBytes
	size := 0
	e.ok = s.t.d.get(key, func(raw []byte) (err error) {
		if s.ttl != nil {
			if e.exp, raw, err = splitExpiry(raw); err != nil {
				return err
			}
			// Kept: a read that renews the value writes it back.
			e.raw = append(e.raw[:0], raw...)
		}
		size = len(raw)
		e.v, err = s.codec.Decode(raw)
		return err
	})
	s.cache[k] = e
	s.charge(e, size)
	return e
}

// charge sets e's cost for a value whose encoding has size bytes.
func (s *diskValues[K, V]) charge(e *cachedValue[V], size int) {
	cost := e.base + int64(size) + int64(cap(e.raw))
	s.bytes += cost - e.cost
	s.t.d.values.used += cost - e.cost
	e.cost = cost
}

// dropCache writes the cache's changes back and empties it.
func (s *diskValues[K, V]) dropCache() {
	s.writeBack()
	s.forget()
}

// forget empties the cache without writing it back.
func (s *diskValues[K, V]) forget() {
	clear(s.cache)
	s.dirty = 0
	s.t.d.values.used -= s.bytes
	s.bytes = 0
}

// get deletes an expired value, and renews one if reads renew.
func (s *diskValues[K, V]) get() (V, bool) {
	e := s.entry()
	if s.ttl != nil && e.ok {
		if s.ttl.expired(e.exp) {
			var zero V
			e.v, e.ok = zero, false
			s.markDirty(e)
		} else if s.ttl.onRead {
			e.exp = s.ttl.stamp()
			s.markDirty(e)
		}
	}
	return e.v, e.ok
}

// set encodes v at once, so that a value the codec cannot encode fails the
// Update, as on the database without a cache.
func (s *diskValues[K, V]) set(v V) {
	e := s.entry()
	raw, err := s.enc(e.raw[:0], v)
	if err != nil {
		s.t.d.fail("encoding a value", err)
	}
	e.v, e.raw, e.ok = v, raw, true
	s.charge(e, len(raw))
	if s.ttl != nil {
		e.exp = s.ttl.stamp()
	}
	s.markDirty(e)
}

func (s *diskValues[K, V]) clear() {
	e := s.entry()
	var zero V
	e.v, e.ok = zero, false
	s.charge(e, 0)
	s.markDirty(e)
}

func (s *diskValues[K, V]) markDirty(e *cachedValue[V]) {
	if !e.dirty {
		e.dirty = true
		s.dirty++
	}
}

// writeBacker is a table of the Pebble backend with a write-back cache.
type writeBacker interface {
	writeBack()
	dropCache()
	halve()
}

// writeBackCaches writes the changes of every table's write-back cache to
// the database, before a snapshot reads it.
func (b *KeyedBackend[K]) writeBackCaches() {
	for _, name := range b.names {
		if w, ok := b.tables[name].(writeBacker); ok {
			w.writeBack()
		}
	}
}

// dropValueCaches writes back and empties the write-back cache of every
// table.
func (b *KeyedBackend[K]) dropValueCaches() {
	for _, name := range b.names {
		if w, ok := b.tables[name].(writeBacker); ok {
			w.dropCache()
		}
	}
}

// halveValueCaches drops half of the entries of every table's write-back
// cache (writing back those that changed), when the caches used up their
// budget. Emptying them instead left them half full on average, and wrote
// back at once every entry that changed: a cache kept between one half and
// all of its budget holds three quarters of it on average, and an entry
// that stays is written back at the next snapshot or eviction only.
func (b *KeyedBackend[K]) halveValueCaches() {
	for _, name := range b.names {
		if w, ok := b.tables[name].(writeBacker); ok {
			w.halve()
		}
	}
}

// boundedWriteBackBatchBytes bounds the batches of a write-back of the
// value caches when the backend takes its memory from a shared
// state.Memory. A batch holds a copy of what it writes in the Go heap, and
// Pebble keeps one larger than half a memtable whole, as a memtable of its
// own, until it is flushed: a write-back in one batch holds as much memory
// again as the cache for a moment, which a bounded budget cannot allow.
// Without a Memory a write-back is one batch: Pebble flushes it whole into
// few large files, which keeps compactions and reads cheaper (1 GiB of
// state-bench on a quiet machine: 60.4 and 70.7 k events/s in one batch,
// 46.8 and 49.9 k in batches of 16 MiB, at the same peak RSS). A
// write-back needs no atomicity (a crashed process's database is never
// reused), only to be complete before the snapshot's view is taken.
const boundedWriteBackBatchBytes = 1 << 20

// writeBack writes the cache's changes to the database (see writeBackOf).
func (s *diskValues[K, V]) writeBack() {
	if s.dirty == 0 {
		return
	}
	size := 0
	for _, e := range s.cache {
		if e.dirty {
			size += recordBytes(e.raw)
		}
	}
	w := s.writeBackOf(size)
	for k, e := range s.cache {
		if e.dirty {
			w.put(k, e)
		}
	}
	w.finish()
}

// evict drops entries of the cache, in the map's order (random), until
// they cost at most keep bytes, writing back those that changed.
func (s *diskValues[K, V]) evict(keep int64) {
	if s.bytes <= keep {
		return
	}
	w := s.writeBackOf(int(s.bytes - keep))
	for k, e := range s.cache {
		if s.bytes <= keep {
			break
		}
		if e.dirty {
			w.put(k, e)
		}
		delete(s.cache, k)
		s.bytes -= e.cost
		s.t.d.values.used -= e.cost
	}
	w.finish()
}

// halve drops about half of what the cache holds (see evict).
func (s *diskValues[K, V]) halve() { s.evict(s.bytes / 2) }

// recordBytes is about what an entry whose encoding is raw takes in a
// batch: its key, value, expiry and the record's header.
func recordBytes(raw []byte) int { return len(raw) + 48 }

// valueWriteBack is one write-back of a cache's changed entries: in one
// batch, sized up front to the entries written (a batch that grows copies
// itself at every doubling), or in batches of about
// boundedWriteBackBatchBytes with a shared Memory.
type valueWriteBack[K comparable, V any] struct {
	s     *diskValues[K, V]
	b     *pebble.Batch
	limit int
	key   []byte
}

// writeBackOf starts a write-back of about size bytes of records.
func (s *diskValues[K, V]) writeBackOf(size int) *valueWriteBack[K, V] {
	w := &valueWriteBack[K, V]{s: s, limit: math.MaxInt}
	if s.t.d.values.shared != nil {
		w.limit = boundedWriteBackBatchBytes
		size = min(size, w.limit+w.limit/8)
	}
	w.b = s.t.d.db.NewBatchWithSize(size)
	return w
}

// put writes k's entry e, a changed one, or deletes k's value if it is
// cleared or expired.
func (w *valueWriteBack[K, V]) put(k K, e *cachedValue[V]) {
	s, d := w.s, w.s.t.d
	w.key = d.dbKeyOf(w.key[:0], s.t.id, k)
	if e.ok && s.ttl != nil && s.ttl.expired(e.exp) {
		var zero V
		e.v, e.ok = zero, false
	}
	var err error
	if e.ok {
		value := e.raw
		if s.ttl != nil {
			s.buf = append(format.AppendInt64(s.buf[:0], e.exp), e.raw...)
			value = s.buf
		}
		err = w.b.Set(w.key, value, nil)
	} else {
		err = w.b.Delete(w.key, nil)
	}
	if err != nil {
		d.fail("writing state", err)
	}
	e.dirty = false
	s.dirty--
	if w.b.Len() >= w.limit {
		d.write(w.b.Commit(pebble.NoSync))
		w.b.Reset()
	}
}

// finish commits what the last batch holds.
func (w *valueWriteBack[K, V]) finish() {
	d := w.s.t.d
	d.write(w.b.Commit(pebble.NoSync))
	if err := w.b.Close(); err != nil {
		d.fail("writing state", err)
	}
}

func (s *diskValues[K, V]) kind() stateKind {
	if s.ttl != nil {
		return kindValue | kindTTL
	}
	return kindValue
}

// capture writes the cache's changes back: Snapshot's view of the database,
// taken after every capture, then holds the whole state.
func (s *diskValues[K, V]) capture() capturedTable[K] {
	s.writeBack()
	return diskValueCapture[K]{diskCapture: newDiskCapture(s.t, s.ttl)}
}

type diskValueCapture[K comparable] struct{ diskCapture[K] }

// encode writes entries: key, value, or with a TTL key, expiry, value
// (leaving out the values expired at the capture).
func (c diskValueCapture[K]) encode(w *sectionWriter[K]) error {
	return c.t.scanView(w.disk, w.owned, func(kg int, key, _, value []byte) error {
		if !c.ttl {
			w.putEncoded(w.encodedKey(kg, key), value)
			return nil
		}
		exp, value, err := splitExpiry(value)
		if err != nil || expiredAt(exp, c.cutoff) {
			return err
		}
		i := w.encodedKey(kg, key)
		w.putExpiry(i, exp)
		w.putEncoded(i, value)
		return nil
	})
}

// stage writes the restored entries into the database. The cache's
// changes are written back first, so that keys the blob does not hold keep
// their values, as on the heap; the cache is dropped once the restore is
// applied, since the blob's entries replace what it holds.
func (s *diskValues[K, V]) stage(r *sectionReader[K], count int) (func(), error) {
	s.writeBack()
	var dbKey, dbValue []byte
	for range count {
		_, key, err := r.encodedKey()
		if err != nil {
			return nil, err
		}
		exp, err := s.restoredExpiry(r)
		if err != nil {
			return nil, err
		}
		_, value, err := readEncoded(r, s.codec)
		if err != nil {
			return nil, err
		}
		if s.ttl != nil {
			dbValue = append(format.AppendInt64(dbValue[:0], exp), value...)
			value = dbValue
		}
		dbKey = s.t.keyIn(dbKey[:0], r.kg, key)
		if err := r.disk.Set(dbKey, value, nil); err != nil {
			return nil, err
		}
	}
	return s.forget, nil
}

// restoredExpiry reads an entry's expiry for the state (see
// restoredExpiry), or skips it without a TTL.
func (s *diskValues[K, V]) restoredExpiry(r *sectionReader[K]) (int64, error) {
	return diskRestoredExpiry(r, s.ttl)
}

func (s *diskValues[K, V]) ttlDomain() TTLTime { return s.ttl.domain }

func (s *diskValues[K, V]) cutoff() int64 { return s.ttl.now() }

// restamp writes the cache back and drops it, so that it holds no expiry
// the database's rewrite changes.
func (s *diskValues[K, V]) restamp() {
	s.dropCache()
	s.t.rewrite(func(value []byte) ([]byte, bool, error) { return restampValue(s.ttl, value) })
}

func (s *diskValues[K, V]) sweepEntry(key, value []byte, b *pebble.Batch) error {
	return sweepStamped(s.ttl, key, value, b)
}
