package state

import (
	"iter"
	"maps"
	"sync"

	"github.com/exactlyonce/exactly/internal/format"
)

// The heap backend's states with a TTL keep each entry with its expiry
// (stamped). An expired entry is deleted when it is read. Snapshots leave
// expired entries out, and the encoding, which visits every entry on the
// snapshot's goroutine anyway, hands the ones it left out back to the
// state (garbage); the backend's goroutine then deletes those still
// expired, sweepBudget at a time in the incremental cleanup and the rest
// at the next capture. So an expired entry stays in memory for at most
// about two checkpoint intervals when nobody reads it.

// heapTTLTable is a state of the heap backend with a TTL.
type heapTTLTable interface {
	ttlTable
	// drain deletes up to budget (all, if budget < 0) of the entries the
	// latest snapshot found expired, if they still are, and returns how
	// many it examined.
	drain(budget int) int
}

// stamped is an entry with its expiry.
type stamped[V any] struct {
	v   V
	exp int64
}

// garbage holds the entries that the encoding of a state's latest snapshot
// found expired. It is written by the encoding's goroutine and read by the
// backend's.
type garbage[T any] struct {
	mu    sync.Mutex
	seq   uint64 // the capture whose encoding found items
	items []T
}

// offer replaces the garbage with items, found by the encoding of capture
// seq, unless a later capture's encoding already offered its own: that
// one finds everything still expired.
func (g *garbage[T]) offer(seq uint64, items []T) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if seq >= g.seq {
		g.seq, g.items = seq, items
	}
}

// take removes and returns up to n items (all, if n < 0).
func (g *garbage[T]) take(n int) []T {
	g.mu.Lock()
	defer g.mu.Unlock()
	if n < 0 || n > len(g.items) {
		n = len(g.items)
	}
	out := g.items[len(g.items)-n:]
	g.items = g.items[:len(g.items)-n]
	return out
}

// heapTTLValues keeps a value state with a TTL in a Go map.
type heapTTLValues[K comparable, V any] struct {
	b        *KeyedBackend[K]
	codec    Codec[V]
	ttl      *ttlConfig
	m        map[K]stamped[V]
	dead     garbage[K]
	captures uint64
}

func newHeapTTLValues[K comparable, V any](b *KeyedBackend[K], codec Codec[V], ttl *ttlConfig) *heapTTLValues[K, V] {
	return &heapTTLValues[K, V]{b: b, codec: codec, ttl: ttl, m: make(map[K]stamped[V])}
}

func (s *heapTTLValues[K, V]) get() (V, bool) {
	var zero V
	e, ok := s.m[s.b.current]
	switch {
	case !ok:
		return zero, false
	case s.ttl.expired(e.exp):
		delete(s.m, s.b.current)
		return zero, false
	case s.ttl.onRead:
		e.exp = s.ttl.stamp()
		s.m[s.b.current] = e
	}
	return e.v, true
}

func (s *heapTTLValues[K, V]) set(v V) { s.m[s.b.current] = stamped[V]{v, s.ttl.stamp()} }

func (s *heapTTLValues[K, V]) clear() { delete(s.m, s.b.current) }

func (s *heapTTLValues[K, V]) kind() stateKind { return kindValue | kindTTL }

func (s *heapTTLValues[K, V]) ttlDomain() TTLTime { return s.ttl.domain }

func (s *heapTTLValues[K, V]) restamp() {
	for k, e := range s.m {
		if e.exp == unstamped {
			e.exp = s.ttl.stamp()
			s.m[k] = e
		}
	}
}

func (s *heapTTLValues[K, V]) drain(budget int) int {
	keys := s.dead.take(budget)
	for _, k := range keys {
		if e, ok := s.m[k]; ok && s.ttl.expired(e.exp) {
			delete(s.m, k)
		}
	}
	return len(keys)
}

func (s *heapTTLValues[K, V]) capture() capturedTable[K] {
	s.drain(-1)
	s.captures++
	return ttlValueCapture[K, V]{m: maps.Clone(s.m), codec: s.codec, now: s.ttl.now(), seq: s.captures, dead: &s.dead}
}

type ttlValueCapture[K comparable, V any] struct {
	m     map[K]stamped[V]
	codec Codec[V]
	now   int64 // the state's clock at the capture
	seq   uint64
	dead  *garbage[K]
}

// encode writes entries: key, expiry, value; expired ones are left out
// and handed back to the state.
func (c ttlValueCapture[K, V]) encode(w *sectionWriter[K]) error {
	enc := appendFunc(c.codec)
	var dead []K
	for k, e := range c.m {
		if expiredAt(e.exp, c.now) {
			dead = append(dead, k)
			continue
		}
		i, in, err := w.key(k)
		if err != nil {
			return err
		}
		if !in {
			continue
		}
		w.putExpiry(i, e.exp)
		if err := putValue(w, i, enc, e.v); err != nil {
			return err
		}
	}
	c.dead.offer(c.seq, dead)
	return nil
}

func (s *heapTTLValues[K, V]) stage(r *sectionReader[K], count int) (func(), error) {
	keys := make([]K, count)
	vals := make([]stamped[V], count)
	for i := range count {
		var err error
		if keys[i], err = r.key(); err != nil {
			return nil, err
		}
		if vals[i].exp, err = restoredExpiry(r, s.ttl); err != nil {
			return nil, err
		}
		if vals[i].v, err = readValue(r, s.codec); err != nil {
			return nil, err
		}
	}
	return func() {
		for i, k := range keys {
			s.m[k] = vals[i]
		}
	}, nil
}

// heapTTLMaps keeps a map state with a TTL in Go maps, each entry with its
// own expiry.
type heapTTLMaps[K comparable, UK comparable, UV any] struct {
	b          *KeyedBackend[K]
	keyCodec   Codec[UK]
	valueCodec Codec[UV]
	ttl        *ttlConfig
	m          map[K]map[UK]stamped[UV] // inner maps are never empty
	dead       garbage[mapEntryOf[K, UK]]
	captures   uint64
}

// mapEntryOf names an entry of a map state.
type mapEntryOf[K comparable, UK comparable] struct {
	k  K
	uk UK
}

func newHeapTTLMaps[K comparable, UK comparable, UV any](b *KeyedBackend[K], keyCodec Codec[UK], valueCodec Codec[UV], ttl *ttlConfig) *heapTTLMaps[K, UK, UV] {
	return &heapTTLMaps[K, UK, UV]{b: b, keyCodec: keyCodec, valueCodec: valueCodec, ttl: ttl, m: make(map[K]map[UK]stamped[UV])}
}

// lookup returns the current key's entry uk if it has not expired,
// deleting it if it has and renewing it if reads renew.
func (s *heapTTLMaps[K, UK, UV]) lookup(uk UK) (UV, bool) {
	var zero UV
	inner := s.m[s.b.current]
	e, ok := inner[uk]
	switch {
	case !ok:
		return zero, false
	case s.ttl.expired(e.exp):
		s.removeFrom(s.b.current, inner, uk)
		return zero, false
	case s.ttl.onRead:
		e.exp = s.ttl.stamp()
		inner[uk] = e
	}
	return e.v, true
}

// removeFrom deletes uk from inner, k's map, and k's map if it is left
// empty.
func (s *heapTTLMaps[K, UK, UV]) removeFrom(k K, inner map[UK]stamped[UV], uk UK) {
	delete(inner, uk)
	if len(inner) == 0 {
		delete(s.m, k)
	}
}

func (s *heapTTLMaps[K, UK, UV]) get(uk UK) (UV, bool) { return s.lookup(uk) }

// inner returns the current key's map, adding an empty one if it has none.
func (s *heapTTLMaps[K, UK, UV]) inner() map[UK]stamped[UV] {
	inner, ok := s.m[s.b.current]
	if !ok {
		inner = make(map[UK]stamped[UV])
		s.m[s.b.current] = inner
	}
	return inner
}

func (s *heapTTLMaps[K, UK, UV]) put(uk UK, uv UV) { s.inner()[uk] = stamped[UV]{uv, s.ttl.stamp()} }

func (s *heapTTLMaps[K, UK, UV]) compute(uk UK, f func(old UV, ok bool) UV) UV {
	inner := s.inner()
	old, ok := inner[uk]
	if ok && s.ttl.expired(old.exp) {
		old, ok = stamped[UV]{}, false
	}
	v := f(old.v, ok)
	inner[uk] = stamped[UV]{v, s.ttl.stamp()}
	return v
}

func (s *heapTTLMaps[K, UK, UV]) remove(uk UK) {
	if inner, ok := s.m[s.b.current]; ok {
		s.removeFrom(s.b.current, inner, uk)
	}
}

func (s *heapTTLMaps[K, UK, UV]) contains(uk UK) bool {
	_, ok := s.lookup(uk)
	return ok
}

func (s *heapTTLMaps[K, UK, UV]) len() int {
	n := 0
	for _, e := range s.m[s.b.current] {
		if !s.ttl.expired(e.exp) {
			n++
		}
	}
	return n
}

// all produces the entries not expired, deleting the expired ones and
// renewing those it produces if reads renew.
func (s *heapTTLMaps[K, UK, UV]) all() iter.Seq2[UK, UV] {
	k := s.b.current
	inner := s.m[k]
	return func(yield func(UK, UV) bool) {
		defer func() {
			if len(s.m[k]) == 0 { // emptied by expiry: inner maps are never empty
				delete(s.m, k)
			}
		}()
		for uk, e := range inner {
			if s.ttl.expired(e.exp) {
				delete(inner, uk)
				continue
			}
			if s.ttl.onRead {
				e.exp = s.ttl.stamp()
				inner[uk] = e
			}
			if !yield(uk, e.v) {
				return
			}
		}
	}
}

func (s *heapTTLMaps[K, UK, UV]) clear() { delete(s.m, s.b.current) }

func (s *heapTTLMaps[K, UK, UV]) kind() stateKind { return kindMap | kindTTL }

func (s *heapTTLMaps[K, UK, UV]) ttlDomain() TTLTime { return s.ttl.domain }

func (s *heapTTLMaps[K, UK, UV]) restamp() {
	for _, inner := range s.m {
		for uk, e := range inner {
			if e.exp == unstamped {
				e.exp = s.ttl.stamp()
				inner[uk] = e
			}
		}
	}
}

func (s *heapTTLMaps[K, UK, UV]) drain(budget int) int {
	entries := s.dead.take(budget)
	for _, d := range entries {
		inner := s.m[d.k]
		if e, ok := inner[d.uk]; ok && s.ttl.expired(e.exp) {
			s.removeFrom(d.k, inner, d.uk)
		}
	}
	return len(entries)
}

func (s *heapTTLMaps[K, UK, UV]) capture() capturedTable[K] {
	s.drain(-1)
	s.captures++
	m := make(map[K]map[UK]stamped[UV], len(s.m))
	for k, inner := range s.m {
		m[k] = maps.Clone(inner)
	}
	return ttlMapCapture[K, UK, UV]{m: m, keyCodec: s.keyCodec, valueCodec: s.valueCodec, now: s.ttl.now(), seq: s.captures, dead: &s.dead}
}

type ttlMapCapture[K comparable, UK comparable, UV any] struct {
	m          map[K]map[UK]stamped[UV]
	keyCodec   Codec[UK]
	valueCodec Codec[UV]
	now        int64
	seq        uint64
	dead       *garbage[mapEntryOf[K, UK]]
}

// encode writes entries: key, count of entries not expired, then user key,
// expiry and value per entry; expired entries are left out (a key with
// only expired ones too) and handed back to the state.
func (c ttlMapCapture[K, UK, UV]) encode(w *sectionWriter[K]) error {
	encKey, encValue := appendFunc(c.keyCodec), appendFunc(c.valueCodec)
	var dead []mapEntryOf[K, UK]
	for k, inner := range c.m {
		live := 0
		for uk, e := range inner {
			if expiredAt(e.exp, c.now) {
				dead = append(dead, mapEntryOf[K, UK]{k, uk})
			} else {
				live++
			}
		}
		if live == 0 {
			continue
		}
		i, in, err := w.key(k)
		if err != nil {
			return err
		}
		if !in {
			continue
		}
		w.putCount(i, live)
		for uk, e := range inner {
			if expiredAt(e.exp, c.now) {
				continue
			}
			if err := putValue(w, i, encKey, uk); err != nil {
				return err
			}
			w.putExpiry(i, e.exp)
			if err := putValue(w, i, encValue, e.v); err != nil {
				return err
			}
		}
	}
	c.dead.offer(c.seq, dead)
	return nil
}

func (s *heapTTLMaps[K, UK, UV]) stage(r *sectionReader[K], count int) (func(), error) {
	keys := make([]K, count)
	inners := make([]map[UK]stamped[UV], count)
	for i := range count {
		var err error
		if keys[i], err = r.key(); err != nil {
			return nil, err
		}
		n, err := r.Count()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, format.CorruptBlob("empty map for a key")
		}
		inner := make(map[UK]stamped[UV], n)
		for range n {
			uk, err := readValue(r, s.keyCodec)
			if err != nil {
				return nil, err
			}
			var e stamped[UV]
			if e.exp, err = restoredExpiry(r, s.ttl); err != nil {
				return nil, err
			}
			if e.v, err = readValue(r, s.valueCodec); err != nil {
				return nil, err
			}
			inner[uk] = e
		}
		inners[i] = inner
	}
	return func() {
		for i, k := range keys {
			s.m[k] = inners[i]
		}
	}, nil
}

// heapTTLLists keeps a list state with a TTL in a Go map of slices, each
// element with its own expiry. As in heapLists, stored slices are
// append-only: removing or renewing elements stores a new slice.
type heapTTLLists[K comparable, V any] struct {
	b        *KeyedBackend[K]
	codec    Codec[V]
	ttl      *ttlConfig
	m        map[K][]stamped[V] // slices are never empty
	dead     garbage[K]
	captures uint64
}

func newHeapTTLLists[K comparable, V any](b *KeyedBackend[K], codec Codec[V], ttl *ttlConfig) *heapTTLLists[K, V] {
	return &heapTTLLists[K, V]{b: b, codec: codec, ttl: ttl, m: make(map[K][]stamped[V])}
}

// live returns k's elements not expired, storing a new slice without the
// expired ones if there are any, and with every element renewed if renew
// is set and reads renew.
func (s *heapTTLLists[K, V]) live(k K, renew bool) []stamped[V] {
	l := s.m[k]
	renew = renew && s.ttl.onRead && len(l) > 0
	expired := 0
	for _, e := range l {
		if s.ttl.expired(e.exp) {
			expired++
		}
	}
	if expired == 0 && !renew {
		return l
	}
	out := make([]stamped[V], 0, len(l)-expired)
	var exp int64
	if renew {
		exp = s.ttl.stamp()
	}
	for _, e := range l {
		if s.ttl.expired(e.exp) {
			continue
		}
		if renew {
			e.exp = exp
		}
		out = append(out, e)
	}
	if len(out) == 0 {
		delete(s.m, k)
		return nil
	}
	s.m[k] = out
	return out
}

func (s *heapTTLLists[K, V]) get() []V {
	l := s.live(s.b.current, true)
	if len(l) == 0 {
		return nil
	}
	vs := make([]V, len(l))
	for i, e := range l {
		vs[i] = e.v
	}
	return vs
}

func (s *heapTTLLists[K, V]) all() iter.Seq[V] {
	l := s.live(s.b.current, true)
	return func(yield func(V) bool) {
		for _, e := range l {
			if !yield(e.v) {
				return
			}
		}
	}
}

func (s *heapTTLLists[K, V]) len() int {
	n := 0
	for _, e := range s.m[s.b.current] {
		if !s.ttl.expired(e.exp) {
			n++
		}
	}
	return n
}

func (s *heapTTLLists[K, V]) add(v V) {
	s.m[s.b.current] = append(s.m[s.b.current], stamped[V]{v, s.ttl.stamp()})
}

// update stores vs, which is not empty, in a new slice.
func (s *heapTTLLists[K, V]) update(vs []V) {
	exp := s.ttl.stamp()
	l := make([]stamped[V], len(vs))
	for i, v := range vs {
		l[i] = stamped[V]{v, exp}
	}
	s.m[s.b.current] = l
}

func (s *heapTTLLists[K, V]) clear() { delete(s.m, s.b.current) }

func (s *heapTTLLists[K, V]) kind() stateKind { return kindList | kindTTL }

func (s *heapTTLLists[K, V]) ttlDomain() TTLTime { return s.ttl.domain }

func (s *heapTTLLists[K, V]) restamp() {
	for k, l := range s.m {
		for i, e := range l {
			if e.exp == unstamped {
				out := make([]stamped[V], len(l))
				copy(out, l)
				for j := i; j < len(out); j++ {
					if out[j].exp == unstamped {
						out[j].exp = s.ttl.stamp()
					}
				}
				s.m[k] = out
				break
			}
		}
	}
}

func (s *heapTTLLists[K, V]) drain(budget int) int {
	keys := s.dead.take(budget)
	for _, k := range keys {
		s.live(k, false)
	}
	return len(keys)
}

func (s *heapTTLLists[K, V]) capture() capturedTable[K] {
	s.drain(-1)
	s.captures++
	return ttlListCapture[K, V]{m: maps.Clone(s.m), codec: s.codec, now: s.ttl.now(), seq: s.captures, dead: &s.dead}
}

type ttlListCapture[K comparable, V any] struct {
	m     map[K][]stamped[V]
	codec Codec[V]
	now   int64
	seq   uint64
	dead  *garbage[K]
}

// encode writes entries: key, count of elements not expired, then expiry
// and element per element; expired elements are left out (a key with
// only expired ones too), and the keys that have any handed back to the
// state.
func (c ttlListCapture[K, V]) encode(w *sectionWriter[K]) error {
	enc := appendFunc(c.codec)
	var dead []K
	for k, l := range c.m {
		live := 0
		for _, e := range l {
			if !expiredAt(e.exp, c.now) {
				live++
			}
		}
		if live < len(l) {
			dead = append(dead, k)
		}
		if live == 0 {
			continue
		}
		i, in, err := w.key(k)
		if err != nil {
			return err
		}
		if !in {
			continue
		}
		w.putCount(i, live)
		for _, e := range l {
			if expiredAt(e.exp, c.now) {
				continue
			}
			w.putExpiry(i, e.exp)
			if err := putValue(w, i, enc, e.v); err != nil {
				return err
			}
		}
	}
	c.dead.offer(c.seq, dead)
	return nil
}

func (s *heapTTLLists[K, V]) stage(r *sectionReader[K], count int) (func(), error) {
	keys := make([]K, count)
	lists := make([][]stamped[V], count)
	for i := range count {
		var err error
		if keys[i], err = r.key(); err != nil {
			return nil, err
		}
		n, err := r.Count()
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, format.CorruptBlob("empty list for a key")
		}
		l := make([]stamped[V], n)
		for j := range l {
			if l[j].exp, err = restoredExpiry(r, s.ttl); err != nil {
				return nil, err
			}
			if l[j].v, err = readValue(r, s.codec); err != nil {
				return nil, err
			}
		}
		lists[i] = l
	}
	return func() {
		for i, k := range keys {
			s.m[k] = lists[i]
		}
	}, nil
}
