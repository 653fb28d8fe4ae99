package runtime

import (
	"context"
	"fmt"
	"math"
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
// it advanced (at most once per Options.WatermarkInterval), and sends
// MaxWatermark when the source is finished.
type WatermarkSource interface {
	// Watermark returns the subtask's watermark, and idle when it has
	// nothing to read that could hold event time back (no split, or every
	// split idle or finished): consumers then ignore this input until its
	// next watermark. An idle subtask's watermark is the greatest of its
	// splits'.
	Watermark() (wm int64, idle bool)
}

// WatermarkOperator is an operator with event-time behaviour.
type WatermarkOperator interface {
	// Watermark reports that the operator's input watermark advanced to wm.
	// It fires what became due (and may emit); the runtime forwards wm
	// downstream after it returns.
	Watermark(ctx context.Context, wm int64) error
}

// watermarkMerger combines the watermarks of a task's inputs into the task's
// own: the least watermark of the inputs that are neither idle nor finished.
// When every input is idle, the task is idle and its watermark becomes the
// greatest of its inputs' (as Flink's status valve does), so that what they
// promised is not held back by nothing. The output never goes back. It is a
// pure state machine.
type watermarkMerger struct {
	wms      []int64
	idle     []bool
	finished []bool
	out      int64 // the last watermark forwarded
	outIdle  bool  // the task last announced itself idle
}

func newWatermarkMerger(inputs int) *watermarkMerger {
	m := &watermarkMerger{
		wms:      make([]int64, inputs),
		idle:     make([]bool, inputs),
		finished: make([]bool, inputs),
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

// watermark records input i's watermark wm (which also makes it active).
func (m *watermarkMerger) watermark(i int, wm int64) mergeResult {
	m.wms[i] = max(m.wms[i], wm)
	m.idle[i] = false
	return m.merge()
}

// markIdle records that input i is idle, its last watermark being wm.
func (m *watermarkMerger) markIdle(i int, wm int64) mergeResult {
	m.wms[i] = max(m.wms[i], wm)
	m.idle[i] = true
	return m.merge()
}

// finish records that input i ended.
func (m *watermarkMerger) finish(i int) mergeResult {
	m.finished[i] = true
	return m.merge()
}

func (m *watermarkMerger) merge() mergeResult {
	least, greatest, active, live := MaxWatermark, MinWatermark, false, false
	for i, wm := range m.wms {
		greatest = max(greatest, wm)
		if m.finished[i] {
			continue
		}
		live = true
		if !m.idle[i] {
			active = true
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
