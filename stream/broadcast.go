package stream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/state"
)

// BroadcastProcessFunc is a keyed process function that also reads a
// broadcast stream: the functions a [BroadcastProcess] operator calls for
// each record of its keyed input, each record of its broadcast input and
// each timer.
type BroadcastProcessFunc[K comparable, IN, B, OUT any] struct {
	// Process handles one record of the keyed input, like
	// [ProcessFunc].Process. It reads the broadcast states and cannot
	// change them (their Put and Delete fail): each subtask holds its own
	// copy, which only ProcessBroadcast may change. Required.
	Process func(ctx *Context[K], in IN, out *Output[OUT]) error
	// ProcessBroadcast handles one record of the broadcast input. Every
	// subtask calls it for every broadcast record, and it must change the
	// broadcast states alike in each (as a function of the record and the
	// broadcast states only), since a checkpoint keeps one subtask's copy
	// for all. It has no current key: keyed state and timers are the
	// keyed input's. What it emits, each subtask emits. Required.
	ProcessBroadcast func(ctx *BroadcastContext, b B, out *Output[OUT]) error
	// OnTimer handles a processing-time timer, as in [ProcessFunc].
	// Optional.
	OnTimer func(ctx *Context[K], when time.Time, out *Output[OUT]) error
	// OnEventTimer handles an event-time timer, called when the least of
	// the two inputs' watermarks reaches when, as in [ProcessFunc].
	// Optional.
	OnEventTimer func(ctx *Context[K], when time.Time, out *Output[OUT]) error
}

// BroadcastContext is what ProcessBroadcast of a [BroadcastProcessFunc]
// knows besides its record.
type BroadcastContext struct {
	watermark func() int64
	subtask   int
}

// Watermark returns the operator's current watermark, as
// [Context.Watermark].
func (c *BroadcastContext) Watermark() time.Time { return time.Unix(0, c.watermark()) }

// Subtask returns the index of the subtask running the function.
func (c *BroadcastContext) Subtask() int { return c.subtask }

// BroadcastProcess runs a keyed process function on a keyed stream and a
// broadcast stream (Flink's KeyedBroadcastProcessFunction): every record
// of broadcast reaches every subtask, which keeps what it needs of it in
// broadcast states (see [NewBroadcastState]), declared by setup; the
// records of ks reach the subtask owning their key, as in [Process], and
// read the broadcast states. Typical use: rules or configuration, a low
// volume stream, applied to a high volume one.
//
// The operator's watermark is the least of its two inputs' watermarks,
// and a checkpoint barrier is aligned over both, as in [CoProcess]. A
// checkpoint holds the broadcast states once, subtask 0's copy, and a
// restore gives it to every subtask, whatever the parallelism. Records of
// the two inputs interleave in an order that may differ between subtasks
// and between runs, as in Flink: a result that must not depend on it
// should wait, for example with an event-time timer, until the broadcast
// records it needs have arrived. name must be unique and stable: the
// state is checkpointed under it.
func BroadcastProcess[K comparable, IN, B, OUT any](ks KeyedStream[K, IN], broadcast Stream[B], name string,
	setup func(ctx *Context[K]) (BroadcastProcessFunc[K, IN, B, OUT], error), opts ...KeyedOption) Stream[OUT] {
	j := ks.s.job
	switch {
	case setup == nil:
		j.fail("BroadcastProcess %q: the setup function is nil: give the function that declares the state and returns the BroadcastProcessFunc", name)
	case broadcast.job != j:
		j.fail("BroadcastProcess %q: the two inputs belong to different jobs: build both in the same job", name)
	}
	keyOf := ks.key
	key := func(v either[IN, B]) K {
		if v.second {
			var none K // a broadcast record has no key; ProcessBroadcast gets no Context
			return none
		}
		return keyOf(v.a)
	}
	wide := tagSecond[IN](broadcast, "bc-in2")
	wide.part = runtime.Broadcast
	inputs := []runtime.Input{
		KeyedStream[K, either[IN, B]]{s: tagFirst[IN, B](ks.s, "bc-in1"), key: key, codec: ks.codec}.input(),
		wide.input(),
	}
	spec := runtime.OperatorSpec{Name: name, Inputs: inputs, BroadcastState: true}
	return keyedProcess[OUT](j, spec, opts, func(oc runtime.OperatorContext, out runtime.Emitter, sides []sideTag) (runtime.Operator, error) {
		return newBroadcastOp(oc, key, ks.codec, setup, out, j.stateBackend, sides)
	})
}

// broadcastOp is the operator of BroadcastProcess: a keyed process
// operator on the tagged records of both inputs, whose snapshots also
// hold the broadcast states.
type broadcastOp[K comparable, IN, B, OUT any] struct {
	*processOp[K, either[IN, B], OUT]
	states *broadcastStates
}

func newBroadcastOp[K comparable, IN, B, OUT any](oc runtime.OperatorContext, key func(either[IN, B]) K, codec state.Codec[K],
	setup func(*Context[K]) (BroadcastProcessFunc[K, IN, B, OUT], error), out runtime.Emitter, sb state.BackendConfig, sides []sideTag) (_ *broadcastOp[K, IN, B, OUT], err error) {
	states := &broadcastStates{}
	var restored [][]byte
	keyed := oc
	if oc.Restored != nil {
		snap := *oc.Restored
		snap.Entries, restored = splitBroadcastEntries(oc.Restored.Entries)
		keyed.Restored = &snap
	}
	p, err := newProcessOp(keyed, key, codec, func(ctx *Context[K]) (ProcessFunc[K, either[IN, B], OUT], error) {
		ctx.broadcast = states
		defer func() { states.sealed = true }()
		fn, err := setup(ctx)
		if err != nil {
			return ProcessFunc[K, either[IN, B], OUT]{}, err
		}
		if fn.Process == nil || fn.ProcessBroadcast == nil {
			return ProcessFunc[K, either[IN, B], OUT]{}, fmt.Errorf("setup returned a BroadcastProcessFunc without Process or ProcessBroadcast: set both")
		}
		bctx := &BroadcastContext{watermark: func() int64 { return ctx.watermark }, subtask: oc.Subtask}
		return ProcessFunc[K, either[IN, B], OUT]{
			Process: func(ctx *Context[K], v either[IN, B], out *Output[OUT]) error {
				if !v.second {
					return fn.Process(ctx, v.a, out)
				}
				states.writable = true
				defer func() { states.writable = false }()
				return fn.ProcessBroadcast(bctx, v.b, out)
			},
			OnTimer:      fn.OnTimer,
			OnEventTimer: fn.OnEventTimer,
		}, nil
	}, out, sb, sides)
	if err != nil {
		return nil, err
	}
	if err := states.restore(restored); err != nil {
		return nil, errors.Join(fmt.Errorf("restoring: %w", err), p.Close(context.Background(), 0, false))
	}
	return &broadcastOp[K, IN, B, OUT]{processOp: p, states: states}, nil
}

// splitBroadcastEntries splits a keyed operator's restored entries into
// its broadcast state entries and the others (its watermarks).
func splitBroadcastEntries(entries [][]byte) (others, broadcast [][]byte) {
	for _, e := range entries {
		if format.IsBroadcastState(e) {
			broadcast = append(broadcast, e)
		} else {
			others = append(others, e)
		}
	}
	return others, broadcast
}

// Snapshot captures the keyed state and the broadcast states.
func (b *broadcastOp[K, IN, B, OUT]) Snapshot(ctx context.Context, id checkpoint.ID) (func() (checkpoint.SubtaskSnapshot, error), error) {
	return b.SnapshotKind(ctx, id, checkpoint.KindCheckpoint)
}

// SnapshotKind captures the keyed state as [processOp.SnapshotKind] does
// and, in subtask 0, the broadcast states, encoded at the barrier: every
// subtask holds the same, so one copy serves all.
func (b *broadcastOp[K, IN, B, OUT]) SnapshotKind(ctx context.Context, id checkpoint.ID, kind checkpoint.Kind) (func() (checkpoint.SubtaskSnapshot, error), error) {
	encode, err := b.processOp.SnapshotKind(ctx, id, kind)
	if err != nil || b.ctx.oc.Subtask != 0 || len(b.states.states) == 0 {
		return encode, err
	}
	entry := b.states.encode()
	return func() (checkpoint.SubtaskSnapshot, error) {
		snap, err := encode()
		snap.Entries = append(snap.Entries, entry)
		return snap, err
	}, nil
}
