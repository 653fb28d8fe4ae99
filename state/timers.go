package state

import (
	"maps"
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
	when, ok := b.timers.next()
	if !ok {
		return time.Time{}, false
	}
	return time.Unix(0, when), true
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

// timerStore holds the timers of one kind: a *timerQueue on the heap
// backend, a *diskTimers (timers_disk.go) on the Pebble backend. Both have
// the semantics of the methods above.
type timerStore[K comparable] interface {
	table[K]
	// add registers the timer of key, the backend's current key, due at
	// when, unless key has one due then.
	add(key K, when int64)
	// delete removes the timer of key, the backend's current key, due at
	// when, if there is one.
	delete(key K, when int64)
	// next returns the due time of the earliest timer, if any.
	next() (int64, bool)
	// popDue removes the timers due at or before n and appends them to
	// dst in order of due time, then of registration.
	popDue(n int64, dst []Timer[K]) []Timer[K]
}

type timerEntry[K comparable] struct {
	key  K
	when int64 // UnixNano
	live bool  // false: a deleted timer's tombstone
}

// timerQueue holds the timers grouped by due time: a min-heap of the due
// times, and per due time a bucket of its timers in registration order. A
// sliding window registers one timer per key and window, and every key's
// timer of a window is due at the window's end: the buckets are few and
// large, so registering a timer costs a lookup in its bucket's index and an
// append, and firing it a step of a scan, with no heap move and no
// per-timer deletion (a fired bucket is dropped whole).
//
// Deletion leaves a tombstone (live false) in the bucket's order until the
// bucket fires or is compacted; a bucket left empty leaves its due time in
// the heap until it reaches the top or the heap is compacted.
type timerQueue[K comparable] struct {
	k       stateKind // kindTimers or kindEventTimers
	whens   []int64   // min-heap of due times; may hold times without a bucket
	buckets map[int64]*timerBucket[K]
	// Emptied buckets kept for reuse: small ones, and large ones (with an
	// index) with their arrays, since a window's next bucket is as large
	// as its last. A new due time takes a small one first: processing-time
	// timeouts, each at its own time, then never take a large one.
	freeSmall, freeLarge []*timerBucket[K]
}

// timerBucket holds the timers due at one time.
type timerBucket[K comparable] struct {
	order   []timerEntry[K] // registration order, tombstones included
	head    int             // order[:head] holds only deleted timers
	pending int             // timers in order not deleted
	// index locates the pending timers in order by key; nil while order
	// holds at most smallBucket entries, which are searched instead.
	index map[K]int
}

const (
	// smallBucket is the most entries a bucket searches without an index.
	smallBucket = 8
	// maxFreeSmall and maxFreeLarge bound the emptied buckets kept for
	// reuse.
	maxFreeSmall = 256
	maxFreeLarge = 4
)

func newTimerQueue[K comparable](k stateKind) *timerQueue[K] {
	return &timerQueue[K]{k: k, buckets: make(map[int64]*timerBucket[K])}
}

func (q *timerQueue[K]) add(key K, when int64) {
	b := q.buckets[when]
	if b == nil {
		switch ns, nl := len(q.freeSmall), len(q.freeLarge); {
		case ns > 0:
			b, q.freeSmall = q.freeSmall[ns-1], q.freeSmall[:ns-1]
		case nl > 0:
			b, q.freeLarge = q.freeLarge[nl-1], q.freeLarge[:nl-1]
		default:
			b = &timerBucket[K]{}
		}
		q.buckets[when] = b
		q.push(when)
	} else if b.find(key) >= 0 {
		return
	}
	b.order = append(b.order, timerEntry[K]{key: key, when: when, live: true})
	b.pending++
	switch {
	case b.index != nil:
		b.index[key] = len(b.order) - 1
	case len(b.order) > smallBucket:
		b.reindex()
	}
}

// delete removes the timer of key due at when, if there is one.
func (q *timerQueue[K]) delete(key K, when int64) {
	b := q.buckets[when]
	if b == nil {
		return
	}
	i := b.find(key)
	if i < 0 {
		return
	}
	b.order[i] = timerEntry[K]{} // a tombstone, with no reference to the key
	if b.index != nil {
		delete(b.index, key)
	}
	b.pending--
	switch {
	case b.pending == 0:
		delete(q.buckets, when)
		q.recycle(b)
		if len(q.whens) > 64 && len(q.whens) > 2*len(q.buckets) {
			q.compact()
		}
	case len(b.order) > 64 && len(b.order) > 2*b.pending:
		b.order = slices.DeleteFunc(b.order, func(e timerEntry[K]) bool { return !e.live })
		b.head = 0
		b.reindex()
	}
}

// find returns the position in b.order of key's pending timer, or -1.
func (b *timerBucket[K]) find(key K) int {
	if b.index != nil {
		if i, ok := b.index[key]; ok {
			return i
		}
		return -1
	}
	for i := b.head; i < len(b.order); i++ {
		if e := &b.order[i]; e.live && e.key == key {
			return i
		}
	}
	return -1
}

// reindex builds b.index from b.order.
func (b *timerBucket[K]) reindex() {
	b.index = make(map[K]int, len(b.order))
	for i, e := range b.order {
		if e.live {
			b.index[e.key] = i
		}
	}
}

// recycle keeps a bucket that left the queue for reuse, with its arrays.
func (q *timerQueue[K]) recycle(b *timerBucket[K]) {
	free, most := &q.freeSmall, maxFreeSmall
	if b.index != nil {
		free, most = &q.freeLarge, maxFreeLarge
	}
	if len(*free) >= most {
		return
	}
	clear(b.order) // drop the key references
	clear(b.index)
	*b = timerBucket[K]{order: b.order[:0], index: b.index}
	*free = append(*free, b)
}

// next returns the due time of the earliest pending timer, dropping the
// due times without a bucket.
func (q *timerQueue[K]) next() (int64, bool) {
	for len(q.whens) > 0 {
		b := q.buckets[q.whens[0]]
		if b == nil {
			q.pop()
			continue
		}
		for !b.order[b.head].live { // a bucket in the queue has a pending timer
			b.head++
		}
		return b.order[b.head].when, true
	}
	return 0, false
}

// popDue removes the timers due at or before n and appends them to dst in order.
func (q *timerQueue[K]) popDue(n int64, dst []Timer[K]) []Timer[K] {
	for len(q.whens) > 0 && q.whens[0] <= n {
		when := q.whens[0]
		q.pop()
		b := q.buckets[when]
		if b == nil {
			continue
		}
		delete(q.buckets, when)
		t := time.Unix(0, when)
		for _, e := range b.order[b.head:] {
			if e.live {
				dst = append(dst, Timer[K]{Key: e.key, When: t})
			}
		}
		q.recycle(b)
	}
	return dst
}

// push adds a due time to the heap.
func (q *timerQueue[K]) push(when int64) {
	q.whens = append(q.whens, when)
	for i := len(q.whens) - 1; i > 0; {
		p := (i - 1) / 2
		if q.whens[p] <= q.whens[i] {
			return
		}
		q.whens[i], q.whens[p] = q.whens[p], q.whens[i]
		i = p
	}
}

// pop removes the heap's first due time.
func (q *timerQueue[K]) pop() {
	last := len(q.whens) - 1
	q.whens[0] = q.whens[last]
	q.whens = q.whens[:last]
	q.down(0)
}

// compact rebuilds the heap from the buckets' due times.
func (q *timerQueue[K]) compact() {
	q.whens = slices.AppendSeq(q.whens[:0], maps.Keys(q.buckets))
	for i := len(q.whens)/2 - 1; i >= 0; i-- {
		q.down(i)
	}
}

func (q *timerQueue[K]) down(i int) {
	n := len(q.whens)
	for {
		c := 2*i + 1
		if c >= n {
			return
		}
		if r := c + 1; r < n && q.whens[r] < q.whens[c] {
			c = r
		}
		if q.whens[c] >= q.whens[i] {
			return
		}
		q.whens[i], q.whens[c] = q.whens[c], q.whens[i]
		i = c
	}
}

// empty reports whether the queue holds no pending timer.
func (q *timerQueue[K]) empty() bool {
	for _, b := range q.buckets {
		if b.pending > 0 {
			return false
		}
	}
	return true
}

// pending returns the pending timers in (when, registration) order.
func (q *timerQueue[K]) pending() []timerEntry[K] {
	var out []timerEntry[K]
	for _, w := range slices.Sorted(maps.Keys(q.buckets)) {
		for _, e := range q.buckets[w].order {
			if e.live {
				out = append(out, e)
			}
		}
	}
	return out
}

func (q *timerQueue[K]) kind() stateKind { return q.k }

func (q *timerQueue[K]) capture() capturedTable[K] {
	return timerCapture[K](q.pending())
}

type timerCapture[K comparable] []timerEntry[K]

// encode writes one entry per timer: key, UnixNano in Int64Codec.
func (c timerCapture[K]) encode(w *sectionWriter[K]) error {
	for _, e := range c {
		i, in, err := w.key(e.key)
		if err != nil {
			return err
		}
		if !in {
			continue
		}
		putTimer(w, i, e.when)
	}
	return nil
}

// putTimer appends a timer's due time, the value of its entry, to the entry
// in key group index i.
func putTimer[K comparable](w *sectionWriter[K], i int, when int64) {
	w.scratch = Int64Codec{}.Append(w.scratch[:0], when)
	w.putEncoded(i, w.scratch)
}

func (q *timerQueue[K]) stage(r *sectionReader[K], count int) (func(), error) {
	entries := make([]timerEntry[K], count)
	for i := range entries {
		var err error
		if entries[i].key, err = r.key(); err != nil {
			return nil, err
		}
		if entries[i].when, err = readValue[K, int64](r, Int64Codec{}); err != nil {
			return nil, err
		}
	}
	return func() {
		for _, e := range entries {
			q.add(e.key, e.when)
		}
	}, nil
}
