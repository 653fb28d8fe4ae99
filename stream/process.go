package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/runtime"
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
}

// Context gives a keyed process function its key, its state and its timers.
type Context[K comparable] struct {
	backend *state.KeyedBackend[K]
	oc      runtime.OperatorContext
}

// Key returns the key of the record or timer being processed.
func (c *Context[K]) Key() K { return c.backend.CurrentKey() }

// Backend returns the keyed state backend, to declare state in the setup
// function, for example state.NewValueState(ctx.Backend(), "total", state.Int64Codec{}).
func (c *Context[K]) Backend() *state.KeyedBackend[K] { return c.backend }

// RegisterTimer asks for OnTimer to be called for the current key at when
// (processing time). Timers are checkpointed with the state. Timers still
// pending when a bounded job ends do not fire.
func (c *Context[K]) RegisterTimer(when time.Time) { c.backend.RegisterTimer(when) }

// DeleteTimer cancels a timer of the current key.
func (c *Context[K]) DeleteTimer(when time.Time) { c.backend.DeleteTimer(when) }

// Subtask returns the index of the subtask running the function.
func (c *Context[K]) Subtask() int { return c.oc.Subtask }

// Output collects the records a process function emits.
type Output[T any] struct{ buf []T }

// Emit sends v downstream.
func (o *Output[T]) Emit(v T) { o.buf = append(o.buf, v) }

// Process runs a keyed process function on a keyed stream. setup is called
// once per subtask, before any record, to declare state (through
// ctx.Backend()) and return the functions. name must be unique and stable:
// the state is checkpointed under it.
func Process[K comparable, IN, OUT any](ks KeyedStream[K, IN], name string,
	setup func(ctx *Context[K]) (ProcessFunc[K, IN, OUT], error), opts ...Option) Stream[OUT] {
	j := ks.s.job
	if setup == nil {
		j.fail("Process %q: the setup function is nil", name)
	}
	nd := &node{spec: runtime.OperatorSpec{
		Name:   name,
		Keyed:  true,
		Inputs: []runtime.Input{ks.input()},
		New: func(ctx context.Context, oc runtime.OperatorContext, out runtime.Emitter) (runtime.Operator, error) {
			return newProcessOp(oc, ks, setup, out)
		},
	}}
	return Stream[OUT]{job: j, op: j.add(nd, opts)}
}

type processOp[K comparable, IN, OUT any] struct {
	key    func(IN) K
	ctx    Context[K]
	fn     ProcessFunc[K, IN, OUT]
	out    runtime.Emitter
	output Output[OUT]
	due    []state.Timer[K]
}

func newProcessOp[K comparable, IN, OUT any](oc runtime.OperatorContext, ks KeyedStream[K, IN],
	setup func(*Context[K]) (ProcessFunc[K, IN, OUT], error), out runtime.Emitter) (*processOp[K, IN, OUT], error) {
	p := &processOp[K, IN, OUT]{key: ks.key, out: out}
	p.ctx = Context[K]{backend: state.NewKeyedBackend(ks.codec, oc.MaxParallelism, oc.KeyGroups), oc: oc}
	fn, err := setup(&p.ctx)
	if err != nil {
		return nil, fmt.Errorf("setup: %w", err)
	}
	if fn.Process == nil {
		return nil, fmt.Errorf("setup returned a ProcessFunc without Process: set the Process field")
	}
	p.fn = fn
	if oc.Restored != nil {
		for kg, blob := range oc.Restored.KeyGroups {
			if err := p.ctx.backend.Restore(kg, blob); err != nil {
				return nil, fmt.Errorf("restoring key group %d: %w", kg, err)
			}
		}
	}
	p.output.buf = make([]OUT, 0, oc.BatchSize)
	return p, nil
}

func (p *processOp[K, IN, OUT]) Process(_ context.Context, batch any) error {
	in, err := batchOf[IN](batch)
	if err != nil {
		return err
	}
	p.output.buf = p.output.buf[:0]
	for _, v := range in {
		p.ctx.backend.SetCurrentKey(p.key(v))
		if err := p.fn.Process(&p.ctx, v, &p.output); err != nil {
			return err
		}
	}
	p.ctx.oc.Records.Add(int64(len(in)))
	return p.emit()
}

func (p *processOp[K, IN, OUT]) emit() error {
	if len(p.output.buf) == 0 {
		return nil
	}
	return p.out.Emit(p.output.buf)
}

func (p *processOp[K, IN, OUT]) Snapshot(context.Context, uint64) (func() (checkpoint.SubtaskSnapshot, error), error) {
	encode := p.ctx.backend.Snapshot()
	return func() (checkpoint.SubtaskSnapshot, error) {
		groups, err := encode()
		return checkpoint.SubtaskSnapshot{KeyGroups: groups}, err
	}, nil
}

func (p *processOp[K, IN, OUT]) NextTimer() (time.Time, bool) { return p.ctx.backend.NextTimer() }

func (p *processOp[K, IN, OUT]) FireTimers(_ context.Context, now time.Time) error {
	p.due = p.ctx.backend.PopDueTimers(now, p.due[:0])
	p.output.buf = p.output.buf[:0]
	for _, t := range p.due {
		if p.fn.OnTimer == nil {
			continue
		}
		p.ctx.backend.SetCurrentKey(t.Key)
		if err := p.fn.OnTimer(&p.ctx, t.When, &p.output); err != nil {
			return err
		}
	}
	return p.emit()
}
