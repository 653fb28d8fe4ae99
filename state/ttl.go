package state

import (
	"fmt"
	"math"
	"time"
)

// TTL makes the entries of a state expire: declare the state with
// WithTTL(TTL{...}). An entry (a ValueState's value, a MapState's entry, a
// ListState's element) expires After its last update, by the state's clock
// (Time); an expired entry is never returned again, and it is removed from
// the backend and from checkpoints by the cleanup (docs/state.md, State
// TTL).
//
// The clock is the backend's, which the engine advances: the operator's
// watermark for TTLEventTime, the processing time for TTLProcessingTime
// (see KeyedBackend.SetWatermark and SetProcessingTime). Event time is the
// default because a replay after a restore then expires what the failed
// run did, up to where watermarks fall between records; processing time
// expires what the clock of the run says, so a replay after a crash may
// expire entries the failed run still saw.
type TTL struct {
	// After is how long an entry lives after its last update: it expires
	// once the state's clock reaches the update's time plus After.
	// Required: a positive duration.
	After time.Duration
	// Update chooses what renews an entry's lifetime: TTLOnCreateAndWrite
	// (the default) or TTLOnReadAndWrite.
	Update TTLUpdate
	// Time chooses the state's clock: TTLEventTime (the default) or
	// TTLProcessingTime.
	Time TTLTime
}

// TTLUpdate chooses what renews the lifetime of an entry of a state with
// a TTL.
type TTLUpdate uint8

const (
	// TTLOnCreateAndWrite renews an entry when it is written: ValueState's
	// Update, MapState's Put and Compute, ListState's Add (the added
	// element) and Update (every element). The default.
	TTLOnCreateAndWrite TTLUpdate = iota
	// TTLOnReadAndWrite renews an entry when it is written and when it is
	// read: ValueState's Value, MapState's Get, Contains and All (each
	// entry produced), ListState's Get and All (every element). Len does
	// not renew. On the Pebble backend a read then also writes.
	TTLOnReadAndWrite
)

// String returns "on create and write" or "on read and write".
func (u TTLUpdate) String() string {
	switch u {
	case TTLOnCreateAndWrite:
		return "on create and write"
	case TTLOnReadAndWrite:
		return "on read and write"
	}
	return fmt.Sprintf("TTLUpdate(%d)", uint8(u))
}

// TTLTime chooses the clock of a state with a TTL.
type TTLTime uint8

const (
	// TTLEventTime measures a TTL in event time: the clock is the keyed
	// operator's watermark (and, in an event-time timer, the timer's time),
	// which is restored with the state: see docs/state.md. Without
	// watermarks (a source without event time) nothing expires until a
	// bounded input ends. The default.
	TTLEventTime TTLTime = iota
	// TTLProcessingTime measures a TTL by the wall clock of the process
	// (as Flink's state TTL does). A replay after a crash runs later than
	// the failed run and may expire entries the failed run still saw.
	TTLProcessingTime
)

// String returns "event time" or "processing time".
func (d TTLTime) String() string {
	switch d {
	case TTLEventTime:
		return "event time"
	case TTLProcessingTime:
		return "processing time"
	}
	return fmt.Sprintf("TTLTime(%d)", uint8(d))
}

// Option configures a state when it is declared with NewValueState,
// NewMapState or NewListState.
type Option interface{ apply(*declOptions) }

// declOptions are the options of one state declaration.
type declOptions struct {
	ttl *TTL
}

type ttlOption TTL

func (o ttlOption) apply(d *declOptions) { t := TTL(o); d.ttl = &t }

// WithTTL declares the state with a TTL: its entries expire as ttl says.
// Whether a state has a TTL, and which, may change between runs: entries
// restored from a checkpoint taken without one get their first expiry
// when restored (or, without a time yet, at the clock's first time), and
// a state restored without a TTL keeps every entry the checkpoint holds.
func WithTTL(ttl TTL) Option { return ttlOption(ttl) }

// collectOptions applies opts and checks them; its errors name the state,
// the field and the fix.
func collectOptions(name string, opts []Option) (declOptions, error) {
	var o declOptions
	for _, opt := range opts {
		if opt != nil {
			opt.apply(&o)
		}
	}
	if t := o.ttl; t != nil {
		for _, c := range []struct {
			bad   bool
			field string
			value any
			fix   string
		}{
			{t.After <= 0, "After", t.After, "use a positive duration such as time.Hour"},
			{t.Update > TTLOnReadAndWrite, "Update", t.Update, "use TTLOnCreateAndWrite or TTLOnReadAndWrite"},
			{t.Time > TTLProcessingTime, "Time", t.Time, "use TTLEventTime or TTLProcessingTime"},
		} {
			if c.bad {
				return o, fmt.Errorf("state: state %q: TTL.%s = %v: %s", name, c.field, c.value, c.fix)
			}
		}
	}
	return o, nil
}

// noTime is a clock's time before it was first set, and unstamped the
// expiry of an entry written while its clock had no time: such an entry
// does not expire until the clock's first time stamps it (restamp).
// Stamped expiries are always greater: now + After, with now > noTime and
// After > 0.
const (
	noTime    = math.MinInt64
	unstamped = math.MinInt64
)

// expiredAt reports whether an entry with expiry exp has expired at now.
func expiredAt(exp, now int64) bool { return exp != unstamped && exp <= now }

// ttlClocks are a backend's clocks, one per TTLTime, in UnixNano, and
// whether entries may have been stamped while each had no time.
type ttlClocks struct {
	now       [2]int64
	unstamped [2]bool
}

func newTTLClocks() ttlClocks { return ttlClocks{now: [2]int64{noTime, noTime}} }

// config returns the configuration of a state declared with ttl, nil for
// none.
func (c *ttlClocks) config(ttl *TTL) *ttlConfig {
	if ttl == nil {
		return nil
	}
	return &ttlConfig{after: int64(ttl.After), onRead: ttl.Update == TTLOnReadAndWrite, domain: ttl.Time,
		clock: &c.now[ttl.Time], pending: &c.unstamped[ttl.Time]}
}

// ttlConfig is the TTL of one state, with its backend's clock.
type ttlConfig struct {
	after   int64 // nanoseconds
	onRead  bool  // reads renew entries
	domain  TTLTime
	clock   *int64 // the backend's clock of domain; read on the backend's goroutine only
	pending *bool  // set when an entry is stamped while the clock has no time
}

// stamp returns the expiry of an entry written now.
func (c *ttlConfig) stamp() int64 {
	now := *c.clock
	if now == noTime {
		*c.pending = true
		return unstamped
	}
	if now > math.MaxInt64-c.after {
		return math.MaxInt64
	}
	return now + c.after
}

// expired reports whether an entry with expiry exp has expired now.
func (c *ttlConfig) expired(exp int64) bool { return expiredAt(exp, *c.clock) }

// now returns the clock's time, for a capture that later runs on another
// goroutine.
func (c *ttlConfig) now() int64 { return *c.clock }

// ttlTable is a state with a TTL.
type ttlTable interface {
	// ttlDomain returns the state's clock.
	ttlDomain() TTLTime
	// restamp gives every entry written while the clock had no time the
	// expiry of an entry written now, the clock's first time.
	restamp()
}

// SetWatermark advances the clock of the states with a TTL in event time
// to the watermark wm (UnixNano); a watermark at or before the current
// one changes nothing. The engine calls it with the keyed operator's
// watermark, and with each event-time timer's time before the timer runs.
func (b *KeyedBackend[K]) SetWatermark(wm int64) { b.advance(TTLEventTime, wm) }

// SetProcessingTime advances the clock of the states with a TTL in
// processing time to now; a time at or before the current one changes
// nothing (so the clock never goes back). The engine calls it with the
// wall-clock time before each batch of records and each firing of
// processing-time timers; tests call it with the times they choose. Times
// must lie between the years 1678 and 2262, as for timers.
func (b *KeyedBackend[K]) SetProcessingTime(now time.Time) {
	b.advance(TTLProcessingTime, now.UnixNano())
}

// advance moves the clock of domain d forward to t. At the clock's first
// time, entries written before it get their expiry.
func (b *KeyedBackend[K]) advance(d TTLTime, t int64) {
	if t <= b.ttl.now[d] {
		return
	}
	first := b.ttl.now[d] == noTime
	b.ttl.now[d] = t
	if first && b.ttl.unstamped[d] {
		b.ttl.unstamped[d] = false
		for _, s := range b.ttls {
			if s.ttlDomain() == d {
				s.restamp()
			}
		}
	}
}

// The incremental cleanup: every sweepEvery calls of SetCurrentKey, the
// heap backend deletes up to sweepBudget of the entries the latest
// snapshot found expired, and the Pebble backend examines sweepBudget more
// database entries of the states with a TTL, deleting the expired ones
// (its sweep goes round the database). Both backends also delete expired
// entries they read, and leave expired entries out of every snapshot.
const (
	sweepEvery  = 64
	sweepBudget = 256
)

// cleanUp runs one step of the incremental cleanup, of about budget
// entries.
func (b *KeyedBackend[K]) cleanUp(budget int) {
	if b.disk != nil {
		b.disk.sweep(budget)
		return
	}
	for _, s := range b.ttls {
		if budget <= 0 {
			return
		}
		budget -= s.(heapTTLTable).drain(budget)
	}
}

// restoredExpiry reads the expiry of an entry of a state with TTL c from
// r: the one the checkpoint recorded or, if it recorded none (the state
// had no TTL) or the entry was written before its clock had a time, the
// expiry of an entry written now.
func restoredExpiry[K comparable](r *sectionReader[K], c *ttlConfig) (int64, error) {
	exp, ok, err := r.expiry()
	if err != nil || ok && exp != unstamped {
		return exp, err
	}
	return c.stamp(), nil
}
