package state

import (
	"slices"
	"time"
)

// Timer is a timer of one key, returned by PopDueTimers and PopEventTimers.
type Timer[K comparable] struct {
	// Key is the key the timer was registered for.
	Key K
	// When is the time the timer is due.
	When time.Time
}

// RegisterTimer registers a processing-time timer for the current key, due at when.
// Registering the same key and time again has no effect: the timer fires once. Times
// are kept as UnixNano, so they must lie between the years 1678 and 2262.
func (b *KeyedBackend[K]) RegisterTimer(when time.Time) { b.timers.add(b.current, when.UnixNano()) }

// DeleteTimer removes the current key's processing-time timer due at when, if there
// is one.
func (b *KeyedBackend[K]) DeleteTimer(when time.Time) { b.timers.delete(b.current, when.UnixNano()) }

// NextTimer returns the due time of the earliest pending processing-time timer, if any.
func (b *KeyedBackend[K]) NextTimer() (time.Time, bool) {
	e, ok := b.timers.top()
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, e.when), true
}

// PopDueTimers removes all processing-time timers due at or before now and appends
// them to dst in time order; timers due at the same time come out in registration
// order.
func (b *KeyedBackend[K]) PopDueTimers(now time.Time, dst []Timer[K]) []Timer[K] {
	return b.timers.popDue(now.UnixNano(), dst)
}

// RegisterEventTimer registers an event-time timer for the current key, due when the
// watermark reaches when (see PopEventTimers). It behaves like RegisterTimer otherwise.
func (b *KeyedBackend[K]) RegisterEventTimer(when time.Time) {
	b.eventTimers.add(b.current, when.UnixNano())
}

// DeleteEventTimer removes the current key's event-time timer due at when, if there
// is one.
func (b *KeyedBackend[K]) DeleteEventTimer(when time.Time) {
	b.eventTimers.delete(b.current, when.UnixNano())
}

// PopEventTimers removes all event-time timers due at or before the watermark (a
// time in UnixNano) and appends them to dst in time order, like PopDueTimers.
func (b *KeyedBackend[K]) PopEventTimers(watermark int64, dst []Timer[K]) []Timer[K] {
	return b.eventTimers.popDue(watermark, dst)
}

// timerID identifies a timer for deduplication.
type timerID[K comparable] struct {
	key  K
	when int64
}

type timerEntry[K comparable] struct {
	key  K
	when int64  // UnixNano
	seq  uint64 // registration order, breaks ties between equal times
}

// timerQueue is a binary min-heap of timers ordered by (when, seq), with the
// pending timers in a map for deduplication and deletion. Deletion is lazy:
// a deleted (or deleted and registered again) timer's heap entry stays until
// it reaches the top, where its sequence number no longer matches the map's.
// So the heap's moves touch no map, which matters with many timers (a
// sliding window registers one per key and window).
type timerQueue[K comparable] struct {
	k    stateKind // kindTimers or kindEventTimers
	heap []timerEntry[K]
	live map[timerID[K]]uint64 // pending timer -> the seq of its heap entry
	seq  uint64
}

func newTimerQueue[K comparable](k stateKind) timerQueue[K] {
	return timerQueue[K]{k: k, live: make(map[timerID[K]]uint64)}
}

func (q *timerQueue[K]) add(key K, when int64) {
	id := timerID[K]{key, when}
	if _, ok := q.live[id]; ok {
		return
	}
	q.seq++
	q.live[id] = q.seq
	q.heap = append(q.heap, timerEntry[K]{key: key, when: when, seq: q.seq})
	q.up(len(q.heap) - 1)
}

// delete removes the timer of key due at when, if there is one.
func (q *timerQueue[K]) delete(key K, when int64) {
	delete(q.live, timerID[K]{key, when})
	if len(q.heap) > 64 && len(q.heap) > 2*len(q.live) {
		q.compact()
	}
}

// isLive reports whether a heap entry is a pending timer, not a stale one.
func (q *timerQueue[K]) isLive(e *timerEntry[K]) bool {
	seq, ok := q.live[timerID[K]{e.key, e.when}]
	return ok && seq == e.seq
}

// top returns the earliest pending timer, dropping stale entries above it.
func (q *timerQueue[K]) top() (*timerEntry[K], bool) {
	for len(q.heap) > 0 {
		if q.isLive(&q.heap[0]) {
			return &q.heap[0], true
		}
		q.pop()
	}
	return nil, false
}

// popDue removes the timers due at or before n and appends them to dst in order.
func (q *timerQueue[K]) popDue(n int64, dst []Timer[K]) []Timer[K] {
	for {
		e, ok := q.top()
		if !ok || e.when > n {
			return dst
		}
		delete(q.live, timerID[K]{e.key, e.when})
		dst = append(dst, Timer[K]{Key: e.key, When: time.Unix(0, e.when)})
		q.pop()
	}
}

// pop removes the heap's first entry.
func (q *timerQueue[K]) pop() {
	last := len(q.heap) - 1
	q.heap[0] = q.heap[last]
	q.heap[last] = timerEntry[K]{} // drop the key reference
	q.heap = q.heap[:last]
	if last > 0 {
		q.down(0)
	}
}

// compact drops the stale entries and restores the heap order.
func (q *timerQueue[K]) compact() {
	q.heap = slices.DeleteFunc(q.heap, func(e timerEntry[K]) bool { return !q.isLive(&e) })
	for i := len(q.heap)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

// pending returns the pending timers, in no particular order.
func (q *timerQueue[K]) pending() []timerEntry[K] {
	out := make([]timerEntry[K], 0, len(q.live))
	for _, e := range q.heap {
		if q.isLive(&e) {
			out = append(out, e)
		}
	}
	return out
}

func (q *timerQueue[K]) less(i, j int) bool {
	a, b := &q.heap[i], &q.heap[j]
	return a.when < b.when || (a.when == b.when && a.seq < b.seq)
}

func (q *timerQueue[K]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			return
		}
		q.heap[i], q.heap[p] = q.heap[p], q.heap[i]
		i = p
	}
}

func (q *timerQueue[K]) down(i int) {
	n := len(q.heap)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && q.less(r, c) {
			c = r
		}
		if !q.less(c, i) {
			return
		}
		q.heap[i], q.heap[c] = q.heap[c], q.heap[i]
		i = c
	}
}

func (q *timerQueue[K]) kind() stateKind { return q.k }

func (q *timerQueue[K]) capture() capturedTable[K] {
	return timerCapture[K](q.pending())
}

type timerCapture[K comparable] []timerEntry[K]

// encode writes one entry per timer: key, UnixNano in Int64Codec.
func (c timerCapture[K]) encode(w *sectionWriter[K]) error {
	enc := appendFunc[int64](Int64Codec{})
	for _, e := range c {
		i, err := w.key(e.key)
		if err != nil {
			return err
		}
		if err := putValue(w, i, enc, e.when); err != nil {
			return err
		}
	}
	return nil
}

func (q *timerQueue[K]) stage(r *sectionReader[K], count int) (func(), error) {
	ids := make([]timerID[K], count)
	for i := range ids {
		var err error
		if ids[i].key, err = r.key(); err != nil {
			return nil, err
		}
		if ids[i].when, err = readValue[K, int64](r, Int64Codec{}); err != nil {
			return nil, err
		}
	}
	return func() {
		for _, id := range ids {
			q.add(id.key, id.when)
		}
	}, nil
}
