package runtime

import (
	"context"

	"fmt"
	"github.com/exactlyonce/exactly/checkpoint"
	"reflect"
	"time"
)

// inputs are the input channels of an operator task and their alignment.
type inputs struct {
	chans []chan Message
	align *aligner
	cases []reflect.SelectCase
	// alignID is the newest barrier seen, alignSince when it first
	// arrived: the alignment time of its checkpoint runs from there.
	alignID    checkpoint.ID
	alignSince time.Time
}

const (
	caseDone = iota
	caseMail
	caseTimer
	caseAsync
	caseInputs
)

// runOperators reads the input channels, aligns barriers and fires timers.
func (t *task) runOperators(ctx context.Context) error {
	in := &inputs{chans: t.inputs, align: newAligner(len(t.inputs))}
	merger := newWatermarkMerger(len(t.inputs))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	head := t.members[0].op
	var timerOps []TimerOperator
	for _, m := range t.members {
		if to, ok := m.op.(TimerOperator); ok {
			timerOps = append(timerOps, to)
		}
	}
	var completions <-chan struct{}
	async, _ := head.(AsyncOperator)
	if async != nil {
		completions = async.Completions()
	}
	for {
		var timerC <-chan time.Time
		next, ok := nextTimer(timerOps)
		ok = ok && !t.inputEnded
		if until, held := merger.deadline(); held && (!ok || until.Before(next)) {
			next, ok = until, true
		}
		if ok {
			timer.Reset(time.Until(next))
			timerC = timer.C
		}
		since := t.waiting()
		which, i, msg := in.receive(ctx, t.mail.wake, timerC, completions)
		t.awake(since)
		switch which {
		case caseDone:
			return ctx.Err()
		case caseAsync:
			if err := async.EmitCompleted(ctx); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if err := t.flush(); err != nil {
				return err
			}
			continue
		case caseMail:
			if _, err := t.drainMailbox(ctx); err != nil {
				return err
			}
			continue
		case caseTimer:
			now := time.Now()
			if err := t.forward(ctx, merger.expire(now)); err != nil {
				return err
			}
			for _, to := range timerOps {
				if err := to.FireTimers(ctx, now); err != nil {
					return fmt.Errorf("%s: timers: %w", t.name, err)
				}
			}
			if err := t.flush(); err != nil {
				return err
			}
			continue
		}
		switch {
		case msg.batch != nil:
			var began time.Time
			if t.debloat != nil {
				began = time.Now()
			}
			var n int64
			if t.debloat != nil || t.headIn != nil {
				n = batchLen(msg.batch)
			}
			if t.headIn != nil {
				t.headIn.Add(n)
			}
			if err := head.Process(ctx, msg.batch); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if err := t.flush(); err != nil {
				return err
			}
			if t.debloat != nil {
				t.debloat.processed(int(n), time.Since(began))
			}
		case msg.hasWatermark:
			if err := t.forward(ctx, merger.watermark(i, msg.watermark, time.Now())); err != nil {
				return err
			}
		case msg.idle:
			if err := t.forward(ctx, merger.markIdle(i, MinWatermark, time.Now())); err != nil {
				return err
			}
		case msg.eos:
			take, ok := in.align.onEnd(i)
			if err := t.forward(ctx, merger.finish(i, time.Now())); err != nil {
				return err
			}
			if in.align.liveInputs() == 0 {
				// Commit notifications posted before the end of the stream
				// must be served before the task ends.
				if _, err := t.drainMailbox(ctx); err != nil {
					return err
				}
				return t.endStream(ctx)
			}
			if ok {
				if err := t.checkpoint(ctx, take, time.Since(in.alignSince)); err != nil {
					return err
				}
			}
		default:
			if msg.barrier.id != in.alignID {
				in.alignID, in.alignSince = msg.barrier.id, time.Now()
			}
			if take, ok := in.align.onBarrier(i, msg.barrier); ok {
				if err := t.checkpoint(ctx, take, time.Since(in.alignSince)); err != nil {
					return err
				}
			}
		}
	}
}

// receive waits for the next event of a task with inputs: cancellation, mail,
// a timer, completed asynchronous work, or a message on an input that is
// neither blocked nor finished.
func (in *inputs) receive(ctx context.Context, mail <-chan struct{}, timer <-chan time.Time, async <-chan struct{}) (which, input int, m Message) {
	if len(in.chans) == 1 && in.align.readable(0) {
		select {
		case <-ctx.Done():
			return caseDone, 0, m
		case <-mail:
			return caseMail, 0, m
		case <-timer:
			return caseTimer, 0, m
		case <-async:
			return caseAsync, 0, m
		case m = <-in.chans[0]:
			return caseInputs, 0, m
		}
	}
	if in.cases == nil {
		in.cases = make([]reflect.SelectCase, caseInputs+len(in.chans))
		for i := range in.cases {
			in.cases[i].Dir = reflect.SelectRecv
		}
		in.cases[caseDone].Chan = reflect.ValueOf(ctx.Done())
		in.cases[caseMail].Chan = reflect.ValueOf(mail)
	}
	in.cases[caseTimer].Chan = reflect.Value{}
	if timer != nil {
		in.cases[caseTimer].Chan = reflect.ValueOf(timer)
	}
	in.cases[caseAsync].Chan = reflect.Value{}
	if async != nil {
		in.cases[caseAsync].Chan = reflect.ValueOf(async)
	}
	for i, c := range in.chans {
		in.cases[caseInputs+i].Chan = reflect.Value{}
		if in.align.readable(i) {
			in.cases[caseInputs+i].Chan = reflect.ValueOf(c)
		}
	}
	chosen, v, _ := reflect.Select(in.cases)
	if chosen < caseInputs {
		return chosen, 0, m
	}
	return caseInputs, chosen - caseInputs, v.Interface().(Message)
}

// nextTimer returns the earliest timer of ops, if any.
func nextTimer(ops []TimerOperator) (time.Time, bool) {
	var next time.Time
	found := false
	for _, op := range ops {
		if t, ok := op.NextTimer(); ok && (!found || t.Before(next)) {
			next, found = t, true
		}
	}
	return next, found
}
