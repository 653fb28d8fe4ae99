package stream

import (
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/exactlyonce/exactly/state"
)

// Windows describes how [WindowAggregate] groups a key's records into
// event-time windows. Make them with [Tumbling], [Sliding] or [Session].
type Windows struct {
	size, slide time.Duration // Tumbling, Sliding
	gap         time.Duration // Session
	session     bool
}

// Tumbling returns back-to-back windows of the given size, aligned to the
// Unix epoch: each record belongs to exactly one.
func Tumbling(size time.Duration) Windows { return Windows{size: size, slide: size} }

// Sliding returns windows of the given size starting at every multiple of
// slide since the Unix epoch: each record belongs to about size/slide of
// them.
func Sliding(size, slide time.Duration) Windows { return Windows{size: size, slide: slide} }

// Session returns session windows: a key's records less than gap apart
// belong to the same session, which ends gap after its last record. A
// record at t opens the window [t, t+gap); windows of the same key that
// overlap merge into one, so a record that bridges two sessions joins them.
// Sessions need [Aggregate].Merge.
func Session(gap time.Duration) Windows { return Windows{gap: gap, session: true} }

// Window is one event-time window of a key, [Start, End), as a result
// reports it.
type Window struct {
	Start, End time.Time
	// Firing counts the results emitted before this one for the window:
	// 0 for its first result, n for its n-th update. An update is emitted
	// when records arrive late, within [AllowedLateness]; it replaces the
	// earlier results (for a session, those of the sessions it absorbed).
	Firing int
}

// Aggregate folds the records of one key and window into an accumulator of
// type A and turns it into the window's output when the window fires.
type Aggregate[K comparable, T, A, OUT any] struct {
	// Add returns acc with v added. The first record of a window gets A's
	// zero value. acc is kept in checkpointed state, so Add must not modify
	// memory acc refers to (the elements of a slice, a map): return a new
	// value instead. Required.
	Add func(acc A, v T) A
	// Merge returns the accumulator of the union of two windows, a of the
	// earlier one and b of the later one, when a record joins two sessions.
	// Like Add it must not modify a or b. Required for [Session] windows,
	// unused by the others.
	Merge func(a, b A) A
	// Result returns the output of a window that fires (see [Window].Firing
	// for late firings). Required.
	Result func(key K, w Window, acc A) OUT
	// Codec encodes accumulators in checkpoints. Required.
	Codec state.Codec[A]
}

// WindowOption configures a [WindowAggregate]: [AllowedLateness],
// [LateRecords], and the options of every operator ([Parallelism]).
type WindowOption interface{ applyWindow(*windowConfig) }

// windowConfig is what the options of a WindowAggregate set.
type windowConfig struct {
	lateness time.Duration
	late     any // an OutputTag of the input's type, or nil
	keyed    []KeyedOption
}

type windowOption func(*windowConfig)

func (o windowOption) applyWindow(c *windowConfig) { o(c) }

func (o AnyOption) applyWindow(c *windowConfig) { c.keyed = append(c.keyed, o) }

// AllowedLateness keeps a window's state for d after it fired, so that a
// record arriving late, after the watermark passed the window's end but
// less than d after it, still counts: it updates the window, which fires
// again with the next watermark (its result's [Window].Firing tells the
// update from the first result). Records later than that are late records
// (see [LateRecords]). Default 0: a window's state goes when it fires.
// Do not use it for output that cannot be updated: each late firing is one
// more result for the same key and window. Turning lateness on or off
// changes the shape of a tumbling or sliding window's state: such a job
// restores only from checkpoints taken with lateness on (or off) as well.
func AllowedLateness(d time.Duration) WindowOption {
	return windowOption(func(c *windowConfig) { c.lateness = d })
}

// LateRecords sends the records too late for every window they belong to
// (behind the watermark by more than the [AllowedLateness]) to the side
// output tag, whose type must be the window's input type; take it with
// [SideOutput]. Either way they are counted in [Metrics].LateRecords.
// Default: they are dropped.
func LateRecords[T any](tag OutputTag[T]) WindowOption {
	return windowOption(func(c *windowConfig) { c.late = tag })
}

// WindowAggregate aggregates the records of each key per event-time window
// and emits one output per key and window when the watermark passes the
// window's end (see [SourceWithEventTime]), and one more per late firing
// (see [AllowedLateness]). timestamp returns a record's event time. A
// record arriving after every window it belongs to expired is a late
// record: counted in [Metrics].LateRecords, and dropped or sent to a side
// output ([LateRecords]). name must be unique and stable: the open windows
// are checkpointed under it.
func WindowAggregate[K comparable, T, A, OUT any](ks KeyedStream[K, T], name string, w Windows, timestamp func(T) time.Time,
	agg Aggregate[K, T, A, OUT], opts ...WindowOption) Stream[OUT] {
	var c windowConfig
	for _, o := range opts {
		o.applyWindow(&c)
	}
	wd := windowing[K, T, A, OUT]{agg: agg, timestamp: timestamp, lateness: int64(c.lateness)}
	wd.result = func(key K, w Window, acc A, out *Output[OUT]) { out.Emit(agg.Result(key, w, acc)) }
	j := ks.s.job
	switch {
	case w.invalid() != "":
		j.fail("WindowAggregate %q: %s", name, w.invalid())
	case timestamp == nil:
		j.fail("WindowAggregate %q: the timestamp function is nil", name)
	case agg.Add == nil || agg.Result == nil || agg.Codec == nil:
		j.fail("WindowAggregate %q: Aggregate.Add, Result and Codec are required", name)
	case w.session && agg.Merge == nil:
		j.fail("WindowAggregate %q: Aggregate.Merge is nil: Session windows merge the accumulators of the sessions a record joins; set Merge", name)
	case c.lateness < 0:
		j.fail("WindowAggregate %q: AllowedLateness(%v) is negative: use 0 (no lateness) or a positive duration", name, c.lateness)
	}
	if c.late != nil {
		if tag, ok := c.late.(OutputTag[T]); ok {
			wd.late = func(v T, out *Output[OUT]) { EmitTo(out, tag, v) }
		} else {
			in := reflect.TypeFor[T]()
			j.fail("WindowAggregate %q: LateRecords tag is a %T, but the window's input records are %v: make the tag with NewOutputTag[%v]", name, c.late, in, in)
		}
	}
	return Process(ks, name, wd.setup(w), c.keyed...)
}

// invalid says what is wrong with w, or returns "".
func (w Windows) invalid() string {
	switch {
	case w.session && w.gap <= 0:
		return fmt.Sprintf("Session gap %v must be positive: use Session(gap) with a positive duration", w.gap)
	case !w.session && (w.size <= 0 || w.slide <= 0):
		return fmt.Sprintf("window size %v and slide %v must be positive: use Tumbling(size), Sliding(size, slide) or Session(gap) with positive durations", w.size, w.slide)
	}
	return ""
}

// setup returns the setup of the process function of the windows w.
func (wd windowing[K, T, A, OUT]) setup(w Windows) func(ctx *Context[K]) (ProcessFunc[K, T, OUT], error) {
	if w.session {
		return func(ctx *Context[K]) (ProcessFunc[K, T, OUT], error) { return newSessionWindows(ctx, wd, int64(w.gap)) }
	}
	return func(ctx *Context[K]) (ProcessFunc[K, T, OUT], error) {
		return newFixedWindows(ctx, wd, int64(w.size), int64(w.slide))
	}
}

// windowing is what every kind of window does alike: late records,
// expiry and firing.
type windowing[K comparable, T, A, OUT any] struct {
	agg       Aggregate[K, T, A, OUT]
	timestamp func(T) time.Time
	lateness  int64
	// late, when set, sends a late record to its side output.
	late func(v T, out *Output[OUT])
	// result emits what a window that fires outputs: agg.Result's value
	// for WindowAggregate, the pairs of a WindowJoin.
	result func(key K, w Window, acc A, out *Output[OUT])
}

// expired reports whether a window ending at end (exclusive) is past its
// allowed lateness at watermark wm: its state goes, records for it are
// late records.
func (wd *windowing[K, T, A, OUT]) expired(end, wm int64) bool {
	return addSat(end-1, wd.lateness) <= wm
}

// cleanupAt is when a fired window ending at end expires.
func (wd *windowing[K, T, A, OUT]) cleanupAt(end int64) time.Time {
	return time.Unix(0, addSat(end-1, wd.lateness))
}

// lateRecord counts v and sends it to the late records' side output.
func (wd *windowing[K, T, A, OUT]) lateRecord(ctx *Context[K], v T, out *Output[OUT]) {
	ctx.oc.LateRecords.Add(1)
	if wd.late != nil {
		wd.late(v, out)
	}
}

// fire emits the result of the window [start, end) with pane p and
// returns the pane after the firing.
func (wd *windowing[K, T, A, OUT]) fire(ctx *Context[K], start, end int64, p pane[A], out *Output[OUT]) pane[A] {
	wd.result(ctx.Key(), Window{Start: time.Unix(0, start), End: time.Unix(0, end), Firing: p.firings}, p.acc, out)
	p.firings++
	p.pending = false
	return p
}

// addSat returns a+b for b >= 0, saturating at math.MaxInt64.
func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// mod returns t modulo m in [0, m), also for negative t.
func mod(t, m int64) int64 { return (t%m + m) % m }
