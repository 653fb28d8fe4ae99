package state

import (
	"encoding/binary"
	"errors"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// The Pebble backend's states with a TTL store each entry's expiry (8
// bytes, big-endian) in the database: before the value's encoding for
// value and map state, before each element's length for list state. An
// expired entry is deleted when it is read, left out of full snapshots,
// and deleted by the sweep: every sweepEvery calls of SetCurrentKey, a
// cursor goes sweepBudget database entries further through the states
// with a TTL (starting over at the end), deleting what expired. An
// incremental checkpoint records the states' clocks (kv.TTLClocksKey), so
// that its restore leaves out what was expired when it was taken, as a
// full snapshot does; the sweep's deletions reach the uploaded files as
// Pebble compacts them.

// diskTTLTable is a state of the Pebble backend with a TTL.
type diskTTLTable interface {
	ttlTable
	// cutoff returns the state's clock, which an incremental checkpoint
	// records.
	cutoff() int64
	// sweepEntry examines the database entry key, value of the state and
	// writes into b what deletes its expired parts.
	sweepEntry(key, value []byte, b *pebble.Batch) error
}

// diskCapture is what the Pebble backend's captures of a state hold: the
// state's keys, and for a state with a TTL its clock at the capture, or
// when it restores from a checkpoint's database the clock the database
// recorded.
type diskCapture[K comparable] struct {
	t      diskTable[K]
	ttl    bool  // entries carry expiries
	cutoff int64 // entries that expired at or before it are left out
}

func newDiskCapture[K comparable](t diskTable[K], ttl *ttlConfig) diskCapture[K] {
	if ttl == nil {
		return diskCapture[K]{t: t}
	}
	return diskCapture[K]{t: t, ttl: true, cutoff: ttl.now()}
}

// errBadExpiry reports a stored entry of a state with a TTL too short to
// hold its expiry.
var errBadExpiry = errors.New("a stored entry of a state with a TTL has no expiry")

// splitExpiry splits the expiry off the front of a stored entry.
func splitExpiry(value []byte) (exp int64, rest []byte, err error) {
	if len(value) < 8 {
		return 0, nil, errBadExpiry
	}
	return int64(binary.BigEndian.Uint64(value)), value[8:], nil
}

// diskRestoredExpiry reads an entry's expiry for a state with TTL ttl (see
// restoredExpiry), or skips it for a state without one.
func diskRestoredExpiry[K comparable](r *sectionReader[K], ttl *ttlConfig) (int64, error) {
	if ttl != nil {
		return restoredExpiry(r, ttl)
	}
	_, _, err := r.expiry()
	return 0, err
}

// restampValue returns a stored value or map entry with the expiry of an
// entry written now if it has none yet.
func restampValue(ttl *ttlConfig, value []byte) ([]byte, bool, error) {
	exp, rest, err := splitExpiry(value)
	if err != nil || exp != unstamped {
		return nil, false, err
	}
	return append(format.AppendInt64(nil, ttl.stamp()), rest...), true, nil
}

// sweepStamped deletes a stored value or map entry if it expired.
func sweepStamped(ttl *ttlConfig, key, value []byte, b *pebble.Batch) error {
	exp, _, err := splitExpiry(value)
	if err != nil {
		return err
	}
	if ttl.expired(exp) {
		return b.Delete(key, nil)
	}
	return nil
}

// rewrite replaces every database entry of the state, in the owned key
// groups, for which change returns a new value, in one batch.
func (t diskTable[K]) rewrite(change func(value []byte) (newValue []byte, changed bool, err error)) {
	d := t.d
	b := d.db.NewBatch()
	defer b.Close()
	for kg := d.b.owned.Start; kg < d.b.owned.End; kg++ {
		lower := kv.AppendStatePrefix(nil, uint16(kg), t.id)
		it := d.newIter(lower, kv.PrefixEnd(lower))
		for ok := it.First(); ok; ok = it.Next() {
			value, err := it.ValueAndErr()
			if err != nil {
				d.fail("reading state", err)
			}
			newValue, changed, err := change(value)
			if err != nil {
				d.fail("restamping state", err)
			}
			if changed {
				if err := b.Set(it.Key(), newValue, nil); err != nil {
					d.fail("restamping state", err)
				}
			}
		}
		d.closeIter(it)
	}
	if !b.Empty() {
		d.write(b.Commit(pebble.NoSync))
	}
}

// registerTTL records that state id has a TTL, for the sweep and the
// checkpoints' clocks.
func (d *diskStore[K]) registerTTL(id uint32, t diskTTLTable) {
	if d.ttl == nil {
		d.ttl = map[uint32]diskTTLTable{}
	}
	d.ttl[id] = t
	i, _ := slices.BinarySearch(d.ttlIDs, id)
	d.ttlIDs = slices.Insert(d.ttlIDs, i, id)
}

// sweep runs one step of the sweep: it examines up to budget database
// entries from where the last step stopped, deletes what expired of the
// entries of states with a TTL, and skips the other states' entries by
// seeking past them.
func (d *diskStore[K]) sweep(budget int) {
	if len(d.ttlIDs) == 0 || d.b.owned.Len() == 0 {
		return
	}
	owned := d.b.owned
	lower := kv.AppendStatePrefix(nil, uint16(owned.Start), 0)
	upper := kv.AppendStatePrefix(nil, uint16(owned.End), 0)
	it := d.newIter(lower, upper)
	b := d.db.NewBatch()
	defer b.Close()
	start := lower
	if d.sweepAt != nil {
		start = d.sweepAt
	}
	ok := it.SeekGE(start)
	for n := 0; ok && n < budget; n++ {
		key := it.Key()
		if len(key) < 6 {
			d.fail("cleaning up expired state", errors.New("a database key shorter than its state prefix"))
		}
		kg, id := binary.BigEndian.Uint16(key), binary.BigEndian.Uint32(key[2:])
		t, ttl := d.ttl[id]
		if !ttl {
			ok = it.SeekGE(d.nextTTLPrefix(kg, id, upper))
			continue
		}
		value, err := it.ValueAndErr()
		if err != nil {
			d.fail("reading state", err)
		}
		if err := t.sweepEntry(key, value, b); err != nil {
			d.fail("cleaning up expired state", err)
		}
		ok = it.Next()
	}
	if ok {
		d.sweepAt = append(d.sweepAt[:0], it.Key()...)
	} else {
		d.sweepAt = nil // round again from the start
	}
	d.closeIter(it)
	if !b.Empty() {
		d.write(b.Commit(pebble.NoSync))
	}
}

// nextTTLPrefix returns the prefix of the next state with a TTL after
// state id in key group kg, or upper if there is none.
func (d *diskStore[K]) nextTTLPrefix(kg uint16, id uint32, upper []byte) []byte {
	i, found := slices.BinarySearch(d.ttlIDs, id)
	if found {
		i++
	}
	if i < len(d.ttlIDs) {
		return kv.AppendStatePrefix(nil, kg, d.ttlIDs[i])
	}
	if int(kg)+1 < d.b.owned.End {
		return kv.AppendStatePrefix(nil, kg+1, d.ttlIDs[0])
	}
	return upper
}

// writeTTLClocks records in the database the clock of every state with a
// TTL, which an incremental checkpoint then holds: in the first owned key
// group, under kv.TTLClocksKey, state id (uint32) and clock (int64) per
// state, big-endian.
func (d *diskStore[K]) writeTTLClocks() {
	if len(d.ttlIDs) == 0 || d.b.owned.Len() == 0 {
		return
	}
	var v []byte
	for _, id := range d.ttlIDs {
		v = binary.BigEndian.AppendUint32(v, id)
		v = format.AppendInt64(v, d.ttl[id].cutoff())
	}
	d.set(kv.TTLClocksKey(uint16(d.b.owned.Start)), v)
}

// readTTLClocks returns the clocks of the states with a TTL that the
// database r, whose first key group is kg, recorded: none for a database
// without states with a TTL.
func readTTLClocks(r pebble.Reader, kg int) (map[uint32]int64, error) {
	v, closer, err := r.Get(kv.TTLClocksKey(uint16(kg)))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer closer.Close()
	if len(v)%12 != 0 {
		return nil, format.CorruptBlob("the database's TTL clocks are %d bytes, not a multiple of 12", len(v))
	}
	clocks := map[uint32]int64{}
	for ; len(v) > 0; v = v[12:] {
		clocks[binary.BigEndian.Uint32(v)] = int64(binary.BigEndian.Uint64(v[4:]))
	}
	return clocks, nil
}
