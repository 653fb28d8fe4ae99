package state

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// diskStore is the Pebble backend's database with the encoding of the
// backend's current key. Its methods run on the backend's goroutine; a
// failing read or write of the database, or a stored value its codec no
// longer decodes, panics (see fail).
type diskStore[K comparable] struct {
	db     *kv.DB
	b      *KeyedBackend[K]
	keyEnc func([]byte, K) ([]byte, error)
	nextID uint32 // id of the next registered state
	// states are the registered states' ids and kinds, which incremental
	// snapshots record.
	states []checkpoint.DBState
	// uploads are what the incremental snapshots uploaded, read and
	// written by their goroutines too.
	uploads uploads
	// local keeps copies of the uploaded files, for restores on this
	// machine.
	local kv.LocalFiles
	// stale is set when the current key changed since key and kg were
	// computed.
	stale  bool
	key    []byte // encoding of the current key
	kg     uint16 // key group of the current key
	buf    []byte // scratch for database keys
	val    []byte // scratch for encoded values
	writes uint64 // writes so far, which tell iterators to refresh
	// ttl are the states with a TTL by id, ttlIDs their ids in order, and
	// sweepAt the database key the sweep's next step starts at (nil: the
	// first); see ttl_disk.go.
	ttl     map[uint32]diskTTLTable
	ttlIDs  []uint32
	sweepAt []byte
	// values is the memory of the value states' write-back caches.
	values valueCache
}

func newDiskStore[K comparable](db *kv.DB, b *KeyedBackend[K], values valueCache) *diskStore[K] {
	return &diskStore[K]{db: db, b: b, keyEnc: appendFunc(b.keyCodec), nextID: 1, stale: true,
		local: kv.NewLocalFiles(db.Base()), values: values}
}

func (d *diskStore[K]) keyChanged() { d.stale = true }

// newTable assigns the next state id to a newly registered state. Ids are
// stable for the life of the database, which is created empty when the
// backend opens.
func (d *diskStore[K]) newTable() diskTable[K] {
	t := diskTable[K]{d: d, id: d.nextID}
	d.nextID++
	return t
}

// register records that the state called name, of the given kind, has
// database id id.
func (d *diskStore[K]) register(name string, kind stateKind, id uint32) {
	d.states = append(d.states, checkpoint.DBState{Name: name, Kind: byte(kind), ID: id})
}

// fail panics with err: the state API has no errors to report a failing
// disk with, and a panic ends the attempt, which restarts from the last
// checkpoint.
func (d *diskStore[K]) fail(what string, err error) {
	panic(fmt.Errorf("state: Pebble backend in %s: %s: %w", d.db.Dir(), what, err))
}

// dbKey returns, in d.buf, the database key of state id for the current
// key, followed by suffix.
func (d *diskStore[K]) dbKey(id uint32, suffix []byte) []byte {
	if d.stale {
		var err error
		if d.key, err = d.keyEnc(d.key[:0], d.b.current); err != nil {
			d.fail(fmt.Sprintf("encoding key %v", d.b.current), err)
		}
		d.kg = uint16(KeyGroupOf(HashKey(d.key), d.b.maxParallelism))
		d.stale = false
	}
	d.buf = kv.AppendKey(d.buf[:0], d.kg, id, d.key)
	d.buf = append(d.buf, suffix...)
	return d.buf
}

// dbKeyOf appends to dst the database key of state id for key k, which
// need not be the current key.
func (d *diskStore[K]) dbKeyOf(dst []byte, id uint32, k K) []byte {
	raw, err := d.keyEnc(nil, k)
	if err != nil {
		d.fail(fmt.Sprintf("encoding key %v", k), err)
	}
	return kv.AppendKey(dst, uint16(KeyGroupOf(HashKey(raw), d.b.maxParallelism)), id, raw)
}

// get calls use with the value stored under key and reports whether there
// is one.
func (d *diskStore[K]) get(key []byte, use func(value []byte) error) bool {
	found, err := d.db.Get(key, use)
	if err != nil {
		d.fail("reading state", err)
	}
	return found
}

// write applies one write and counts it.
func (d *diskStore[K]) write(err error) {
	if err != nil {
		d.fail("writing state", err)
	}
	d.writes++
}

func (d *diskStore[K]) set(key, value []byte) { d.write(d.db.Set(key, value)) }

func (d *diskStore[K]) append(key, value []byte) { d.write(d.db.Append(key, value)) }

func (d *diskStore[K]) delete(key []byte) { d.write(d.db.Delete(key)) }

// setBoth sets two keys in one batch.
func (d *diskStore[K]) setBoth(key1, value1, key2, value2 []byte) {
	b := d.db.NewBatch()
	defer b.Close()
	if err := errors.Join(b.Set(key1, value1, nil), b.Set(key2, value2, nil)); err != nil {
		d.fail("writing state", err)
	}
	d.write(b.Commit(pebble.NoSync))
}

// deleteBoth deletes two keys in one batch.
func (d *diskStore[K]) deleteBoth(key1, key2 []byte) {
	b := d.db.NewBatch()
	defer b.Close()
	if err := errors.Join(b.Delete(key1, nil), b.Delete(key2, nil)); err != nil {
		d.fail("writing state", err)
	}
	d.write(b.Commit(pebble.NoSync))
}

// deletePrefix deletes every key that starts with prefix.
func (d *diskStore[K]) deletePrefix(prefix []byte) {
	d.write(d.db.DeleteRange(prefix, kv.PrefixEnd(prefix)))
}

// scan calls visit with the keys, and their values, that start with
// prefix, in order, until visit returns false. Writes made by visit are
// seen as writes to a Go map being ranged over are: an entry removed before
// it is reached is not visited, an entry added may or may not be.
func (d *diskStore[K]) scan(prefix []byte, visit func(key, value []byte) bool) {
	lower := bytes.Clone(prefix)
	upper := kv.PrefixEnd(lower)
	it := d.newIter(lower, upper)
	defer func() { d.closeIter(it) }()
	for ok := it.First(); ok; {
		value, err := it.ValueAndErr()
		if err != nil {
			d.fail("reading state", err)
		}
		writes := d.writes
		if !visit(it.Key(), value) {
			return
		}
		if d.writes == writes {
			ok = it.Next()
			continue
		}
		// visit wrote: go on after the visited key in a new iterator, which
		// sees the writes.
		resume := append(bytes.Clone(it.Key()), 0)
		d.closeIter(it)
		it = d.newIter(lower, upper)
		ok = it.SeekGE(resume)
	}
}

func (d *diskStore[K]) newIter(lower, upper []byte) *pebble.Iterator {
	it, err := d.db.NewIter(lower, upper)
	if err != nil {
		d.fail("reading state", err)
	}
	return it
}

// closeIter closes it, failing on the error that ended its iteration.
func (d *diskStore[K]) closeIter(it *pebble.Iterator) {
	if err := it.Close(); err != nil {
		d.fail("reading state", err)
	}
}
