package state

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// The Pebble backend keeps both kinds of timers in its database, each kind
// as two indexes under reserved state ids, in the key group of the timer's
// key (package kv, layout.go):
//
//	by key:  keyGroup id   keyLen:uvarint key when:8  -> seq:uint64
//	by time: keyGroup id+1 when:8 seq:uint64          -> key
//
// when is the due time (UnixNano) with its sign bit flipped, big-endian,
// so that byte order is time order; seq numbers the kind's registrations
// (a counter per kind, which incremental checkpoints record under
// kv.TimerSeqsKey). The index by key finds a key's timer due at a time, to
// register it once and to delete it; the index by time orders a key
// group's timers by due time, then registration. In memory there is only
// each owned key group's earliest timer (its head), read when needed.

// The reserved state ids of the timers' indexes by key; the index by time
// has the next id. Registered states are numbered from 1 and never reach
// them. An index by key sorts before its index by time, so the first key of
// a key group with only timers follows the layout of AppendKey.
const (
	timersDBID      = math.MaxUint32 - 3
	eventTimersDBID = math.MaxUint32 - 1
)

// diskTimers are the timers of one kind on the Pebble backend.
type diskTimers[K comparable] struct {
	d     *diskStore[K]
	k     stateKind // kindTimers or kindEventTimers
	byKey uint32    // id of the index by key; byKey+1 is the index by time's
	seq   uint64    // seq of the next registration
	// heads are the owned key groups' earliest timers; first is the index
	// in heads of the earliest of all, -1 if there is none, unless stale.
	heads []timerHead
	first int
	stale bool
	buf   []byte // scratch for database keys
	// popped collects the timers popDue removes, kept for reuse.
	popped []diskTimer[K]
}

// timerHead is the earliest timer of a key group.
type timerHead struct {
	state uint8 // headUnknown, headBounded, headNone or headKnown
	when  int64
	seq   uint64
}

const (
	headUnknown uint8 = iota // not read from the database yet
	// headBounded is not read from the database yet either, but no timer
	// of the key group fires before when and seq (those of a head just
	// deleted): reading starts there, past the deleted timers' tombstones,
	// which a queue on an LSM tree accumulates at its front.
	headBounded
	headNone  // the key group has no timer
	headKnown // when and seq are the earliest timer's
)

// before reports whether h is a timer that fires before o.
func (h timerHead) before(o timerHead) bool {
	return h.when < o.when || h.when == o.when && h.seq < o.seq
}

// diskTimer is a timer read from the index by time.
type diskTimer[K comparable] struct {
	when int64
	seq  uint64
	key  K
}

// useDiskTimers makes the Pebble backend keep its timers in its database.
func (b *KeyedBackend[K]) useDiskTimers() {
	for _, s := range []struct {
		name string
		kind stateKind
		id   uint32
		dst  *timerStore[K]
	}{{timersName, kindTimers, timersDBID, &b.timers}, {eventTimersName, kindEventTimers, eventTimersDBID, &b.eventTimers}} {
		t := &diskTimers[K]{d: b.disk, k: s.kind, byKey: s.id, heads: make([]timerHead, b.owned.Len()), stale: true}
		*s.dst = t
		b.tables[s.name] = t
		b.disk.register(s.name, s.kind, s.id)
	}
}

// errBadTimer reports a stored entry of an index by key that is not a seq.
var errBadTimer = errors.New("a stored timer's registration number is not 8 bytes")

// keyEntry returns, in t.d.buf, the key of the current key's entry in the
// index by key for the time when.
func (t *diskTimers[K]) keyEntry(when int64) []byte {
	t.buf = kv.AppendTime(t.buf[:0], when)
	return t.d.dbKey(t.byKey, t.buf)
}

// headOf returns the head of key group kg, nil if kg is not owned (a
// record routed to the wrong subtask, which the next snapshot reports).
func (t *diskTimers[K]) headOf(kg uint16) *timerHead {
	i := int(kg) - t.d.b.owned.Start
	if i < 0 || i >= len(t.heads) {
		return nil
	}
	return &t.heads[i]
}

func (t *diskTimers[K]) add(_ K, when int64) {
	key := t.keyEntry(when)
	if t.d.get(key, func([]byte) error { return nil }) {
		return
	}
	seq := t.seq
	t.seq++
	t.buf = kv.AppendTimeKey(t.buf[:0], t.d.kg, t.byKey+1, when, seq)
	t.d.setBoth(key, binary.BigEndian.AppendUint64(nil, seq), t.buf, t.d.key)
	h := t.headOf(t.d.kg)
	if h == nil {
		return
	}
	added := timerHead{state: headKnown, when: when, seq: seq}
	if h.state == headNone || (h.state == headKnown || h.state == headBounded) && added.before(*h) {
		*h = added
	}
	switch i := int(t.d.kg) - t.d.b.owned.Start; {
	case t.stale:
	case h.state != headKnown:
		t.stale = true
	case t.first < 0 || h.before(t.heads[t.first]):
		t.first = i
	}
}

func (t *diskTimers[K]) delete(_ K, when int64) {
	key := t.keyEntry(when)
	var seq uint64
	found := t.d.get(key, func(v []byte) error {
		if len(v) != 8 {
			return errBadTimer
		}
		seq = binary.BigEndian.Uint64(v)
		return nil
	})
	if !found {
		return
	}
	t.buf = kv.AppendTimeKey(t.buf[:0], t.d.kg, t.byKey+1, when, seq)
	t.d.deleteBoth(key, t.buf)
	// The key group's next timer is due no earlier: only deleting the
	// earliest of all makes the others' heads count.
	if h := t.headOf(t.d.kg); h != nil && h.state == headKnown && h.when == when && h.seq == seq {
		h.state = headBounded
		if !t.stale && t.first == int(t.d.kg)-t.d.b.owned.Start {
			t.stale = true
		}
	}
}

func (t *diskTimers[K]) next() (int64, bool) {
	if t.stale {
		t.first = -1
		for i := range t.heads {
			h := t.read(i)
			if h.state == headKnown && (t.first < 0 || h.before(t.heads[t.first])) {
				t.first = i
			}
		}
		t.stale = false
	}
	if t.first < 0 {
		return 0, false
	}
	return t.heads[t.first].when, true
}

// read returns the head of the key group of index i in heads, reading it
// from the database if it is not known.
func (t *diskTimers[K]) read(i int) *timerHead {
	h := &t.heads[i]
	if h.state != headUnknown && h.state != headBounded {
		return h
	}
	it := t.timeIter(i, *h)
	*h = timerHead{state: headNone}
	if it.First() {
		t.setHead(h, it.Key())
	}
	t.d.closeIter(it)
	return h
}

// timeIter returns an iterator over the index by time of the key group of
// index i in heads, from its head h on when h is known or bounded.
func (t *diskTimers[K]) timeIter(i int, h timerHead) *pebble.Iterator {
	kg := uint16(t.d.b.owned.Start + i)
	prefix := kv.AppendStatePrefix(nil, kg, t.byKey+1)
	lower := prefix
	if h.state == headKnown || h.state == headBounded {
		lower = kv.AppendTimeKey(nil, kg, t.byKey+1, h.when, h.seq)
	}
	return t.d.newIter(lower, kv.PrefixEnd(prefix))
}

// setHead makes the timer of the index by time key the head h.
func (t *diskTimers[K]) setHead(h *timerHead, key []byte) {
	when, seq, err := kv.SplitTimeKey(key)
	if err != nil {
		t.d.fail("reading timers", err)
	}
	*h = timerHead{state: headKnown, when: when, seq: seq}
}

func (t *diskTimers[K]) popDue(n int64, dst []Timer[K]) []Timer[K] {
	if first, ok := t.next(); !ok || first > n {
		return dst
	}
	batch := t.d.db.NewBatch()
	defer batch.Close()
	popped := t.popped[:0]
	for i := range t.heads {
		if h := t.read(i); h.state == headKnown && h.when <= n {
			popped = t.popKeyGroup(i, n, popped, batch)
		}
	}
	t.d.write(batch.Commit(pebble.NoSync))
	t.stale = true
	// Each key group's timers are in order; registration numbers order
	// those of different key groups due at the same time.
	slices.SortFunc(popped, func(a, b diskTimer[K]) int { return cmp.Or(cmp.Compare(a.when, b.when), cmp.Compare(a.seq, b.seq)) })
	for _, p := range popped {
		dst = append(dst, Timer[K]{Key: p.key, When: time.Unix(0, p.when)})
	}
	clear(popped) // drop the key references
	t.popped = popped[:0]
	return dst
}

// popKeyGroup appends to popped the timers due at or before n of the key
// group of index i in heads, writes their deletion into batch, and sets
// the key group's head to its next timer.
func (t *diskTimers[K]) popKeyGroup(i int, n int64, popped []diskTimer[K], batch *pebble.Batch) []diskTimer[K] {
	kg := uint16(t.d.b.owned.Start + i)
	h := &t.heads[i]
	it := t.timeIter(i, *h)
	defer t.d.closeIter(it)
	*h = timerHead{state: headNone}
	for ok := it.First(); ok; ok = it.Next() {
		when, seq, err := kv.SplitTimeKey(it.Key())
		if err != nil {
			t.d.fail("reading timers", err)
		}
		if when > n {
			*h = timerHead{state: headKnown, when: when, seq: seq}
			break
		}
		raw, err := it.ValueAndErr()
		if err != nil {
			t.d.fail("reading timers", err)
		}
		key, err := t.d.b.keyCodec.Decode(raw)
		if err != nil {
			t.d.fail(fmt.Sprintf("decoding the key of a timer in key group %d", kg), err)
		}
		popped = append(popped, diskTimer[K]{when: when, seq: seq, key: key})
		t.buf = kv.AppendTime(kv.AppendKey(t.buf[:0], kg, t.byKey, raw), when)
		if err := errors.Join(batch.Delete(it.Key(), nil), batch.Delete(t.buf, nil)); err != nil {
			t.d.fail("writing timers", err)
		}
	}
	return popped
}

func (t *diskTimers[K]) kind() stateKind { return t.k }

func (t *diskTimers[K]) capture() capturedTable[K] { return diskTimerCapture[K]{byKey: t.byKey} }

// diskTimerCapture encodes the timers of the index by time after byKey
// from the database view of the snapshot, in each key group's order.
type diskTimerCapture[K comparable] struct{ byKey uint32 }

func (c diskTimerCapture[K]) encode(w *sectionWriter[K]) error {
	for kg := w.owned.Start; kg < w.owned.End; kg++ {
		if err := c.encodeKeyGroup(w, kg); err != nil {
			return err
		}
	}
	return nil
}

func (c diskTimerCapture[K]) encodeKeyGroup(w *sectionWriter[K], kg int) (err error) {
	lower := kv.AppendStatePrefix(nil, uint16(kg), c.byKey+1)
	it, err := w.disk.NewIter(&pebble.IterOptions{LowerBound: lower, UpperBound: kv.PrefixEnd(lower)})
	if err != nil {
		return err
	}
	defer func() {
		if cerr := it.Close(); err == nil {
			err = cerr
		}
	}()
	for ok := it.First(); ok; ok = it.Next() {
		when, _, err := kv.SplitTimeKey(it.Key())
		if err != nil {
			return fmt.Errorf("key group %d: %w", kg, err)
		}
		raw, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		putTimer(w, w.encodedKey(kg, raw), when)
	}
	return nil
}

// stage writes the restored timers into the database, numbered in the
// blob's order after the timers registered so far; a timer the key has
// already is left out, as on the heap.
func (t *diskTimers[K]) stage(r *sectionReader[K], count int) (func(), error) {
	kg := r.kg
	seq := t.seq
	staged := map[string]bool{} // index by key entries written into r.disk
	var key []byte
	for range count {
		_, raw, err := r.encodedKey()
		if err != nil {
			return nil, err
		}
		when, err := readValue[K, int64](r, Int64Codec{})
		if err != nil {
			return nil, err
		}
		key = kv.AppendTime(kv.AppendKey(key[:0], uint16(kg), t.byKey, raw), when)
		if staged[string(key)] || t.d.get(key, func([]byte) error { return nil }) {
			continue
		}
		staged[string(key)] = true
		t.buf = kv.AppendTimeKey(t.buf[:0], uint16(kg), t.byKey+1, when, seq)
		if err := errors.Join(r.disk.Set(key, binary.BigEndian.AppendUint64(nil, seq), nil), r.disk.Set(t.buf, raw, nil)); err != nil {
			return nil, err
		}
		seq++
	}
	return func() {
		t.seq = seq
		t.forget(kg)
	}, nil
}

// forget drops the head of key group kg, whose timers changed in the
// database.
func (t *diskTimers[K]) forget(kg int) {
	if h := t.headOf(uint16(kg)); h != nil {
		h.state = headUnknown
	}
	t.stale = true
}

// writeTimerSeqs records in the database the next seq of both kinds of
// timers, which an incremental checkpoint then holds: in the first owned
// key group, under kv.TimerSeqsKey, processing time then event time,
// 8 bytes each, big-endian.
func (b *KeyedBackend[K]) writeTimerSeqs() {
	if b.owned.Len() == 0 {
		return
	}
	v := binary.BigEndian.AppendUint64(nil, b.timers.(*diskTimers[K]).seq)
	v = binary.BigEndian.AppendUint64(v, b.eventTimers.(*diskTimers[K]).seq)
	b.disk.set(kv.TimerSeqsKey(uint16(b.owned.Start)), v)
}

// adoptTimers takes the timers of a database just adopted, whose first key
// group is kg: it reads the seqs the database recorded, so that later
// registrations come after the adopted ones, and forgets every head.
func (b *KeyedBackend[K]) adoptTimers(kg int) error {
	seqs, err := readTimerSeqs(b.disk.db.Reader(), kg)
	if err != nil {
		return err
	}
	b.timersRestored(seqs, b.owned)
	return nil
}

// readTimerSeqs reads the next seqs of both kinds of timers that a
// database whose first key group is kg recorded (see writeTimerSeqs).
func readTimerSeqs(r pebble.Reader, kg int) ([2]uint64, error) {
	var seqs [2]uint64
	v, closer, err := r.Get(kv.TimerSeqsKey(uint16(kg)))
	if errors.Is(err, pebble.ErrNotFound) {
		return seqs, format.CorruptBlob("the database lists timers but has no timer seqs (key group %d, state id 0, key \"timers\")", kg)
	}
	if err != nil {
		return seqs, err
	}
	defer closer.Close()
	if len(v) != 16 {
		return seqs, format.CorruptBlob("the database's timer seqs are %d bytes, not 16", len(v))
	}
	return [2]uint64{binary.BigEndian.Uint64(v), binary.BigEndian.Uint64(v[8:])}, nil
}

// timersRestored takes the timers of the key groups keys as written into
// the database from a database that recorded seqs: the next timers are
// numbered after them, and the heads of keys are read again.
func (b *KeyedBackend[K]) timersRestored(seqs [2]uint64, keys KeyGroupRange) {
	for i, s := range []timerStore[K]{b.timers, b.eventTimers} {
		t := s.(*diskTimers[K])
		t.seq = max(t.seq, seqs[i])
		for kg := keys.Start; kg < keys.End; kg++ {
			t.forget(kg)
		}
	}
}
