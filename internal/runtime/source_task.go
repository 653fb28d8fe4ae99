package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Source subtasks with nothing to read wait this long at first, doubling up
// to idleMax, before they poll again. A mailbox message wakes them at once.
const (
	idleMin = time.Millisecond
	idleMax = 50 * time.Millisecond
)

// runSource polls the source, emits batches and serves the mailbox between them.
func (t *task) runSource(ctx context.Context) error {
	src := t.members[0].source
	wms, _ := src.(WatermarkSource)
	merger := newWatermarkMerger(1)
	pacer := newWatermarkPacer(t.wmInterval)
	idle := idleMin
	finished := false
	woken := false
	wait := time.NewTimer(time.Hour)
	defer wait.Stop()
	for {
		// A source that always has records never reaches the select below,
		// and a chain without routers never blocks on a channel that would
		// notice the cancellation.
		if err := ctx.Err(); err != nil {
			return err
		}
		if !woken {
			select {
			case <-t.mail.wake:
				woken = true
			default:
			}
		}
		if woken {
			woken = false
			if done, err := t.drainMailbox(ctx); done || err != nil {
				return err
			}
		}
		if !finished {
			n, fin, err := t.poll(ctx, src)
			if err != nil {
				return fmt.Errorf("source %s: %w", t.name, err)
			}
			if n > 0 {
				t.unreported = t.reportCaughtUp
				if err := t.flush(); err != nil {
					return err
				}
				if err := t.sourceWatermark(ctx, wms, merger, pacer); err != nil {
					return err
				}
				idle = idleMin
				continue
			}
			if fin {
				finished = true
				// Event time ends with the input: every window closes.
				if err := t.forward(ctx, merger.watermark(0, MaxWatermark, time.Now())); err != nil {
					return err
				}
				t.report(ctx, event{kind: evSourceFinished})
			} else if err := t.sourceWatermark(ctx, wms, merger, pacer); err != nil {
				return err
			} else if t.unreported {
				// Read all that is visible now, after new input: a
				// checkpoint may commit what it produced (a stage that
				// reads what the stage before it just committed). Told
				// without waiting: a driver busy with storage hears it at
				// the next empty poll instead of holding the source.
				t.unreported = !t.tryReport(event{kind: evCaughtUp})
			}
		}
		var timeout <-chan time.Time
		if !finished {
			wait.Reset(idle)
			timeout = wait.C
			idle = min(2*idle, idleMax)
		}
		since := t.waiting()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.mail.wake:
			woken = true
		case <-timeout:
		}
		t.awake(since)
	}
}

// poll polls the source under a context that mail for the task cancels; a
// context.Canceled error from that cancellation is not a failure: the
// source was interrupted to serve the mail.
func (t *task) poll(ctx context.Context, src SourceOperator) (n int, finished bool, err error) {
	pctx, done := t.mail.interruptible(ctx)
	defer done()
	n, finished, err = src.Poll(pctx)
	if errors.Is(err, context.Canceled) && pctx.Err() != nil && ctx.Err() == nil {
		return n, false, nil
	}
	return n, finished, err
}

// sourceWatermark sends the watermark or idleness of a source subtask
// downstream when it changed and the pacer says it is due.
func (t *task) sourceWatermark(ctx context.Context, src WatermarkSource, m *watermarkMerger, p *watermarkPacer) error {
	if src == nil {
		return nil
	}
	wm, idle := src.Watermark()
	if !p.due(time.Now(), wm) {
		return nil
	}
	if idle {
		return t.forward(ctx, m.markIdle(0, wm, time.Now()))
	}
	return t.forward(ctx, m.watermark(0, wm, time.Now()))
}
