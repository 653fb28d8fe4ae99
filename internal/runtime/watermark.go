package runtime

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Event time is a count of nanoseconds since the Unix epoch, like
// time.Time.UnixNano. A watermark W travelling in a stream promises that no
// record with an event time at or before W follows it; operators with
// event-time state (windows, event-time timers) act when it passes.
const (
	// MinWatermark is the watermark before any was received.
	MinWatermark int64 = math.MinInt64
	// MaxWatermark ends event time: a finished bounded source sends it, and
	// every pending event-time timer fires.
	MaxWatermark int64 = math.MaxInt64
)

// WatermarkSource is a source subtask that tracks event time. The runtime
// asks it for its watermark after polls, sends the watermark downstream when
// it advanced (see watermarkPacer for how often), and sends MaxWatermark
// when the source is finished.
type WatermarkSource interface {
	// Watermark returns the subtask's watermark, and idle when it has
	// nothing to read that could hold event time back (no split, or every
	// split idle or finished): consumers then ignore this input until its
	// next watermark. An idle subtask's watermark is the greatest of its
	// splits'.
	Watermark() (wm int64, idle bool)
}

// watermarkPacer decides when a source subtask sends its watermark: when
// an interval of wall-clock time has passed since it last sent one, or as
// soon as the watermark is an interval of event time past that one. Read
// live, event time passes as fast as wall-clock time and the first rule
// paces; read from a backlog, it passes many times faster, and the second
// rule closes windows at the pace of event time instead of letting each
// key's open windows pile up between two watermarks (with 1 s of backlog
// read per 10 ms, a 200 ms interval would keep 20 s of windows open). It
// is a pure state machine.
type watermarkPacer struct {
	interval time.Duration
	sentAt   time.Time // when the last watermark was sent
	sent     int64     // the last watermark sent
}

func newWatermarkPacer(interval time.Duration) *watermarkPacer {
	return &watermarkPacer{interval: interval, sent: MinWatermark}
}

// due reports whether the watermark wm, read at now, is to be sent; if so
// it records it as sent.
func (p *watermarkPacer) due(now time.Time, wm int64) bool {
	ahead := p.sent != MinWatermark && wm > p.sent && uint64(wm-p.sent) >= uint64(p.interval)
	if !ahead && now.Sub(p.sentAt) < p.interval {
		return false
	}
	p.sentAt, p.sent = now, max(p.sent, wm) // a watermark going back is not sent on
	return true
}

// WatermarkOperator is an operator with event-time behaviour.
type WatermarkOperator interface {
	// Watermark reports that the operator's input watermark advanced to wm.
	// It fires what became due (and may emit); the runtime forwards wm
	// downstream after it returns.
	Watermark(ctx context.Context, wm int64) error
}

// IdleListener is an operator told when its task became idle (every input
// idle, see watermarkMerger): the watermark it last got does not advance
// until the next Watermark call, which also says the task is active again.
type IdleListener interface {
	// Idle reports that the operator's input became idle.
	Idle(ctx context.Context) error
}

// watermarkMerger combines the watermarks of a task's inputs into the task's
// own: the least watermark of the inputs that are neither idle nor finished.
// When every input is idle, the task is idle and its watermark becomes the
// greatest of its inputs' (as Flink's status valve does), so that what they
// promised is not held back by nothing. The output never goes back.
//
// When an idle input turns active again, the inputs still idle hold the
// output at their watermarks for ResumeGrace, or until they turn active
// too: inputs that paused together (their common upstream paused) resume
// one by one, and the first must not carry the watermark past the records
// the others are about to send. An input that stays idle through a hold is
// not held again until it has been active: an input with nothing to read
// delays the watermark once, by ResumeGrace, after it went idle. It is a
// pure state machine: the caller passes the time and calls expire at
// deadline.
type watermarkMerger struct {
	wms      []int64
	idle     []bool
	finished []bool
	// spent marks the idle inputs that were idle through a whole hold.
	spent   []bool
	hold    ResumeHold
	out     int64 // the last watermark forwarded
	outIdle bool  // the task last announced itself idle
}

// ResumeGrace is how long a task's idle inputs (and a source subtask's
// idle splits) hold its watermark after another one turned active again:
// the time within which inputs paused by one cause are expected to
// resume, a checkpoint or two of a stage before them.
const ResumeGrace = 2 * time.Second

// ResumeHold is the clock of a hold of idle inputs: it runs for
// ResumeGrace from the first Begin while none runs. The inputs it holds,
// and which are spent, are its user's (watermarkMerger, a source
// subtask's splits).
type ResumeHold struct {
	until time.Time // zero when no hold runs
}

// Begin starts a hold at now unless one runs.
func (h *ResumeHold) Begin(now time.Time) {
	if h.until.IsZero() {
		h.until = now.Add(ResumeGrace)
	}
}

// End ends the hold if it is over at now, and reports whether it did: the
// inputs still idle are then spent.
func (h *ResumeHold) End(now time.Time) bool {
	if h.until.IsZero() || now.Before(h.until) {
		return false
	}
	h.until = time.Time{}
	return true
}

// Holding reports whether a hold runs.
func (h *ResumeHold) Holding() bool { return !h.until.IsZero() }

// Deadline returns when the running hold ends, if one runs.
func (h *ResumeHold) Deadline() (time.Time, bool) { return h.until, h.Holding() }

func newWatermarkMerger(inputs int) *watermarkMerger {
	m := &watermarkMerger{
		wms:      make([]int64, inputs),
		idle:     make([]bool, inputs),
		finished: make([]bool, inputs),
		spent:    make([]bool, inputs),
		out:      MinWatermark,
	}
	for i := range m.wms {
		m.wms[i] = MinWatermark
	}
	return m
}

// mergeResult says what a task forwards after an input's watermark changed.
type mergeResult struct {
	advance bool  // forward the watermark wm
	wm      int64 // the task's new watermark when advance is set
	idle    bool  // then announce that the task is idle
}

// watermark records input i's watermark wm (which also makes it active) at
// now.
func (m *watermarkMerger) watermark(i int, wm int64, now time.Time) mergeResult {
	resumed := m.idle[i]
	m.wms[i] = max(m.wms[i], wm)
	m.idle[i], m.spent[i] = false, false
	if resumed && m.holdable() {
		m.hold.Begin(now)
	}
	return m.merge(now)
}

// markIdle records that input i is idle at now, its last watermark being wm.
func (m *watermarkMerger) markIdle(i int, wm int64, now time.Time) mergeResult {
	m.wms[i] = max(m.wms[i], wm)
	m.idle[i] = true
	return m.merge(now)
}

// finish records that input i ended.
func (m *watermarkMerger) finish(i int, now time.Time) mergeResult {
	m.finished[i] = true
	return m.merge(now)
}

// deadline returns when the hold ends, if there is one: the caller calls
// expire then.
func (m *watermarkMerger) deadline() (time.Time, bool) { return m.hold.Deadline() }

// expire ends the hold if it is over at now.
func (m *watermarkMerger) expire(now time.Time) mergeResult {
	return m.merge(now)
}

// holdable reports whether an input is idle, live and not spent: one a
// hold would hold.
func (m *watermarkMerger) holdable() bool {
	for i := range m.wms {
		if m.idle[i] && !m.finished[i] && !m.spent[i] {
			return true
		}
	}
	return false
}

func (m *watermarkMerger) merge(now time.Time) mergeResult {
	if m.hold.End(now) {
		for i := range m.spent {
			m.spent[i] = m.spent[i] || m.idle[i]
		}
	}
	holding := m.hold.Holding()
	least, greatest, active, live := MaxWatermark, MinWatermark, false, false
	for i, wm := range m.wms {
		greatest = max(greatest, wm)
		if m.finished[i] {
			continue
		}
		live = true
		if !m.idle[i] {
			active = true
		}
		if !m.idle[i] || holding && !m.spent[i] {
			least = min(least, wm)
		}
	}
	switch {
	case !live:
		return mergeResult{} // the end of the stream follows
	case !active:
		var r mergeResult
		if greatest > m.out {
			m.out = greatest
			r = mergeResult{advance: true, wm: greatest}
		}
		if !m.outIdle {
			m.outIdle, r.idle = true, true
		}
		return r
	case least > m.out:
		m.out, m.outIdle = least, false
		return mergeResult{advance: true, wm: least}
	case m.outIdle:
		// Active again without progress: announce the current watermark so
		// that consumers count this input again.
		m.outIdle = false
		return mergeResult{advance: true, wm: m.out}
	}
	return mergeResult{}
}

// watermarkMessage returns the message carrying watermark wm.
func watermarkMessage(wm int64) Message { return Message{watermark: wm, hasWatermark: true} }

// idleMessage announces that the producer subtask is idle.
var idleMessage = Message{idle: true}

// forward acts on a merge result: it hands an advanced watermark to every
// operator of the chain in order and sends it downstream, then sends the
// idleness.
func (t *task) forward(ctx context.Context, r mergeResult) error {
	if t.eventTime != nil {
		if r.advance {
			t.eventTime.watermark.Store(r.wm)
			t.eventTime.idle.Store(false)
		}
		if r.idle {
			t.eventTime.idle.Store(true)
		}
	}
	if r.advance {
		for _, m := range t.members {
			wo, ok := m.op.(WatermarkOperator)
			if !ok {
				continue
			}
			if err := wo.Watermark(ctx, r.wm); err != nil {
				return fmt.Errorf("%s[%d]: watermark: %w", m.spec.Name, t.subtask, err)
			}
		}
		if err := t.broadcast(watermarkMessage(r.wm)); err != nil {
			return err
		}
	}
	if r.idle {
		for _, m := range t.members {
			if il, ok := m.op.(IdleListener); ok {
				if err := il.Idle(ctx); err != nil {
					return fmt.Errorf("%s[%d]: idle: %w", m.spec.Name, t.subtask, err)
				}
			}
		}
		return t.broadcast(idleMessage)
	}
	return nil
}

// broadcast sends m to every consumer of the task.
func (t *task) broadcast(m Message) error {
	for _, r := range t.routers {
		if err := r.Broadcast(m); err != nil {
			return err
		}
	}
	return nil
}
