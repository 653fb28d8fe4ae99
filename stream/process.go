package stream

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/state"
)

// ProcessFunc is a keyed process function: the functions a [Process]
// operator calls for each record and each timer.
type ProcessFunc[K comparable, IN, OUT any] struct {
	// Process handles one record. State read or written during the call
	// belongs to ctx.Key(). Required.
	Process func(ctx *Context[K], in IN, out *Output[OUT]) error
	// OnTimer handles a processing-time timer registered for ctx.Key().
	// Optional; timers registered without it are dropped when they fire.
	OnTimer func(ctx *Context[K], when time.Time, out *Output[OUT]) error
	// OnEventTimer handles an event-time timer registered for ctx.Key(),
	// called when the watermark reaches when. Optional, like OnTimer.
	OnEventTimer func(ctx *Context[K], when time.Time, out *Output[OUT]) error
}

// Context gives a keyed process function its key, its state and its timers.
type Context[K comparable] struct {
	backend   *state.KeyedBackend[K]
	oc        runtime.OperatorContext
	watermark int64 // the operator's input watermark, UnixNano
	// broadcast holds the broadcast states of a BroadcastProcess
	// operator's subtask; nil in other operators.
	broadcast *broadcastStates
}

// Key returns the key of the record or timer being processed.
func (c *Context[K]) Key() K { return c.backend.CurrentKey() }

// State returns the scope in which the setup function declares keyed
// state, for example state.NewValueState(ctx.State(), "total",
// state.Int64Codec{}).
func (c *Context[K]) State() state.Scope[K] { return c.backend.Scope() }

// RegisterTimer asks for OnTimer to be called for the current key at when
// (processing time). Timers are checkpointed with the state. Timers still
// pending when a bounded job ends do not fire.
func (c *Context[K]) RegisterTimer(when time.Time) { c.backend.RegisterTimer(when) }

// DeleteTimer cancels a timer of the current key.
func (c *Context[K]) DeleteTimer(when time.Time) { c.backend.DeleteTimer(when) }

// RegisterEventTimer asks for OnEventTimer to be called for the current key
// once the watermark reaches when. A timer at or before the current
// watermark fires with the next watermark. Event-time timers are
// checkpointed with the state; all of them fire when a bounded input ends.
func (c *Context[K]) RegisterEventTimer(when time.Time) { c.backend.RegisterEventTimer(when) }

// DeleteEventTimer cancels an event-time timer of the current key.
func (c *Context[K]) DeleteEventTimer(when time.Time) { c.backend.DeleteEventTimer(when) }

// Watermark returns the operator's current watermark: no record with an
// event time at or before it is expected any more (see [SourceWithEventTime]).
// Before the first watermark it is the earliest representable time,
// time.Unix(0, math.MinInt64).
func (c *Context[K]) Watermark() time.Time { return time.Unix(0, c.watermark) }

// Subtask returns the index of the subtask running the function.
func (c *Context[K]) Subtask() int { return c.oc.Subtask }

// Output collects the records a process function emits: to the main
// output with Emit, to a side output with [EmitTo].
type Output[T any] struct {
	buf   []T
	sides sideOutputs
}

// Emit sends v downstream.
func (o *Output[T]) Emit(v T) { o.buf = append(o.buf, v) }

// Process runs a keyed process function on a keyed stream. setup is called
// once per subtask, before any record, to declare state (through
// ctx.State()) and return the functions. name must be unique and stable:
// the state is checkpointed under it.
func Process[K comparable, IN, OUT any](ks KeyedStream[K, IN], name string,
	setup func(ctx *Context[K]) (ProcessFunc[K, IN, OUT], error), opts ...KeyedOption) Stream[OUT] {
	if setup == nil {
		ks.s.job.fail("Process %q: the setup function is nil: give the function that declares the state and returns the ProcessFunc", name)
	}
	j := ks.s.job
	spec := runtime.OperatorSpec{Name: name, Inputs: []runtime.Input{ks.input()}}
	return keyedProcess[OUT](j, spec, opts, func(oc runtime.OperatorContext, out runtime.Emitter, sides []sideTag) (runtime.Operator, error) {
		return newProcessOp(oc, ks.key, ks.codec, setup, out, j.stateBackend, sides)
	})
}

// keyedProcess adds the keyed operator spec describes, reading its
// hash-partitioned (or broadcast) inputs, whose subtasks newOp creates
// with the operator's side output tags. Every input of a task, however
// many operators feed it, is aligned and its watermarks merged by the
// runtime alike.
func keyedProcess[OUT any](j *Job, spec runtime.OperatorSpec, opts []KeyedOption,
	newOp func(oc runtime.OperatorContext, out runtime.Emitter, sides []sideTag) (runtime.Operator, error)) Stream[OUT] {
	nd := &node{sideOutputs: true, spec: spec}
	nd.spec.Keyed = true
	nd.spec.New = func(ctx context.Context, oc runtime.OperatorContext, out runtime.Emitter) (runtime.Operator, error) {
		return newOp(oc, out, nd.sides)
	}
	return Stream[OUT]{job: j, op: j.add(nd, options(opts, KeyedOption.applyKeyed))}
}

type processOp[K comparable, IN, OUT any] struct {
	key    func(IN) K
	ctx    Context[K]
	fn     ProcessFunc[K, IN, OUT]
	out    runtime.Emitter
	output Output[OUT]
	due    []state.Timer[K]
}

func newProcessOp[K comparable, IN, OUT any](oc runtime.OperatorContext, key func(IN) K, codec state.Codec[K],
	setup func(*Context[K]) (ProcessFunc[K, IN, OUT], error), out runtime.Emitter, sb state.BackendConfig, sides []sideTag) (_ *processOp[K, IN, OUT], err error) {
	backend, err := state.OpenKeyedBackend(sb, oc.Operator, oc.Subtask, codec, oc.MaxParallelism, oc.KeyGroups)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, backend.Close())
		}
	}()
	p := &processOp[K, IN, OUT]{key: key, out: out}
	p.ctx = Context[K]{backend: backend, oc: oc, watermark: runtime.MinWatermark}
	fn, err := setup(&p.ctx)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	if fn.Process == nil {
		return nil, fmt.Errorf("setup returned a ProcessFunc without Process: set the Process field")
	}
	p.fn = fn
	// The clocks of the states with a TTL are set before the restore,
	// which stamps the entries of states that had no TTL.
	backend.SetProcessingTime(time.Now())
	if oc.Restored != nil {
		wm, err := restoredWatermark(oc.Restored.Entries)
		if err != nil {
			return nil, err
		}
		p.ctx.watermark = wm
		backend.SetWatermark(wm)
	}
	p.output.buf = make([]OUT, 0, oc.BatchSize)
	p.output.sides = newSideOutputs(sides, oc.BatchSize)
	return p, nil
}

// RestoreState restores the keyed state of oc.Restored: the databases
// and key groups of the subtasks it was taken from. The runtime calls it
// for every subtask at once after building them ([runtime.StateRestorer]).
func (p *processOp[K, IN, OUT]) RestoreState(context.Context) error {
	restored := p.ctx.oc.Restored
	if restored == nil {
		return nil
	}
	if err := p.ctx.backend.RestoreDBs(restored.DBs, p.ctx.oc.SharedFiles); err != nil {
		return fmt.Errorf("restoring: %w", err)
	}
	for kg, blob := range restored.KeyGroups {
		if err := p.ctx.backend.Restore(kg, blob); err != nil {
			return fmt.Errorf("restoring key group %d: %w", kg, err)
		}
	}
	return nil
}

func (p *processOp[K, IN, OUT]) Process(_ context.Context, batch any) error {
	in, err := batchOf[IN](batch)
	if err != nil {
		return err
	}
	p.output.buf = p.output.buf[:0]
	p.ctx.backend.SetProcessingTime(time.Now())
	for _, v := range in {
		p.ctx.backend.SetCurrentKey(p.key(v))
		if err := p.fn.Process(&p.ctx, v, &p.output); err != nil {
			return err
		}
	}
	return p.emit()
}

// Close releases the keyed state backend.
func (p *processOp[K, IN, OUT]) Close(context.Context, checkpoint.ID, bool) error {
	return p.ctx.backend.Close()
}

// emit sends what the functions emitted to the main and side outputs.
func (p *processOp[K, IN, OUT]) emit() error {
	if err := p.output.sides.flush(p.ctx.oc.SideOutputs); err != nil {
		return err
	}
	if len(p.output.buf) == 0 {
		return nil
	}
	return p.out.Emit(p.output.buf)
}

// Snapshot captures the keyed state of a checkpoint.
func (p *processOp[K, IN, OUT]) Snapshot(ctx context.Context, id checkpoint.ID) (func() (checkpoint.SubtaskSnapshot, error), error) {
	return p.SnapshotKind(ctx, id, checkpoint.KindCheckpoint)
}

// SnapshotKind captures the keyed state (incrementally for a checkpoint
// on the Pebble backend: see state.KeyedBackend.SnapshotFor) and, once
// event time began, the watermark: restored, it keeps windows that closed
// before the checkpoint from opening again for records replayed behind it.
//
// The snapshot leaves out the entries of states with a TTL that expired by
// now: the processing-time clock is advanced first, for an operator that
// got no record for a while.
func (p *processOp[K, IN, OUT]) SnapshotKind(_ context.Context, id checkpoint.ID, kind checkpoint.Kind) (func() (checkpoint.SubtaskSnapshot, error), error) {
	p.ctx.backend.SetProcessingTime(time.Now())
	encode, err := p.ctx.backend.SnapshotFor(id, kind, p.ctx.oc.SharedFiles)
	if err != nil {
		return nil, err
	}
	var entries [][]byte
	if p.ctx.watermark != runtime.MinWatermark {
		entries = [][]byte{format.EncodeWatermark(p.ctx.watermark)}
	}
	return func() (checkpoint.SubtaskSnapshot, error) {
		snap, err := encode()
		snap.Entries = entries
		return snap, err
	}, nil
}

// SnapshotComplete lets the backend refer again to the files that
// checkpoint id uploaded. Local copies it fails to remove cost only disk
// space: a warning.
func (p *processOp[K, IN, OUT]) SnapshotComplete(id checkpoint.ID) {
	if err := p.ctx.backend.CheckpointComplete(id); err != nil {
		p.ctx.oc.Logger.Warn("state: after checkpoint "+strconv.FormatUint(uint64(id), 10), "err", err)
	}
}

// restoredWatermark returns the least watermark of the former subtasks
// whose key groups a subtask restores, or MinWatermark if none had one.
func restoredWatermark(entries [][]byte) (int64, error) {
	wm := runtime.MinWatermark
	for i, e := range entries {
		w, err := format.DecodeWatermark(e)
		if err != nil {
			return 0, fmt.Errorf("restoring: operator entry %d is %w", i, err)
		}
		if i == 0 || w < wm {
			wm = w
		}
	}
	return wm, nil
}

// Watermark fires the event-time timers the watermark wm passed. The
// event-time clock of the states with a TTL is each timer's time while it
// runs, then wm: what a timer reads does not depend on how far one
// watermark jumped.
func (p *processOp[K, IN, OUT]) Watermark(_ context.Context, wm int64) error {
	if wm <= p.ctx.watermark {
		return nil
	}
	p.ctx.watermark = wm
	err := p.fire(p.ctx.backend.PopEventTimers(wm, p.due[:0]), p.fn.OnEventTimer, true)
	p.ctx.backend.SetWatermark(wm)
	return err
}

func (p *processOp[K, IN, OUT]) NextTimer() (time.Time, bool) { return p.ctx.backend.NextTimer() }

func (p *processOp[K, IN, OUT]) FireTimers(_ context.Context, now time.Time) error {
	p.ctx.backend.SetProcessingTime(now)
	return p.fire(p.ctx.backend.PopDueTimers(now, p.due[:0]), p.fn.OnTimer, false)
}

// fire calls onTimer (if set) for every timer of due and emits the output;
// for event-time timers (eventTime) it first advances the event-time TTL
// clock to the timer's time.
func (p *processOp[K, IN, OUT]) fire(due []state.Timer[K], onTimer func(*Context[K], time.Time, *Output[OUT]) error, eventTime bool) error {
	p.due = due
	p.output.buf = p.output.buf[:0]
	for _, t := range due {
		if onTimer == nil {
			continue
		}
		if eventTime {
			p.ctx.backend.SetWatermark(t.When.UnixNano())
		}
		p.ctx.backend.SetCurrentKey(t.Key)
		if err := onTimer(&p.ctx, t.When, &p.output); err != nil {
			return err
		}
	}
	return p.emit()
}
