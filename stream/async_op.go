package stream

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/state"
)

// asyncOp is a subtask of AsyncMap: it issues a request per input record
// on a goroutine of its own and emits the results on the task's goroutine
// when the task calls EmitCompleted (see runtime.AsyncOperator).
type asyncOp[IN, OUT any] struct {
	name  string
	codec state.Codec[IN]
	fn    func(context.Context, IN) (OUT, error)
	o     AsyncOptions
	out   runtime.Emitter
	oc    runtime.OperatorContext
	// queue holds the requests not emitted yet, in input order.
	queue     []*asyncRequest[IN, OUT]
	completed chan struct{} // signalled when a request completes
	buf       []OUT
	ctx       context.Context // the requests'; cancelled by Close
	cancel    context.CancelFunc
	running   sync.WaitGroup
	// failures is AsyncOptions.Failures' tag, nil when failed requests
	// fail the operator; sides buffers the side outputs.
	failures *OutputTag[AsyncFailure[IN]]
	sides    sideOutputs
}

// asyncRequest is one input record's request. result and err are set
// before done.
type asyncRequest[IN, OUT any] struct {
	in       IN
	result   OUT
	err      error
	attempts int // how many times the request was tried
	done     atomic.Bool
}

func newAsyncOp[IN, OUT any](oc runtime.OperatorContext, codec state.Codec[IN], fn func(context.Context, IN) (OUT, error), o AsyncOptions, out runtime.Emitter,
	failures *OutputTag[AsyncFailure[IN]], sides []sideTag) (*asyncOp[IN, OUT], error) {
	a := &asyncOp[IN, OUT]{name: oc.Operator, codec: codec, fn: fn, o: o, out: out, oc: oc,
		completed: make(chan struct{}, 1), buf: make([]OUT, 0, oc.BatchSize), failures: failures, sides: newSideOutputs(sides, oc.BatchSize)}
	a.ctx, a.cancel = context.WithCancel(context.Background())
	if oc.Restored == nil {
		return a, nil
	}
	// Every subtask receives the records in flight of every former
	// subtask and issues every Parallelism-th, in their order.
	for i, e := range oc.Restored.Entries {
		if i%oc.Parallelism != oc.Subtask {
			continue
		}
		b, err := format.DecodeAsyncInput(e)
		if err == nil {
			var in IN
			if in, err = codec.Decode(b); err != nil {
				err = fmt.Errorf("a record its codec cannot decode (%w): %w", err, checkpoint.ErrCorrupt)
			}
			if err == nil {
				a.issue(in)
				continue
			}
		}
		a.Close(context.Background(), 0, false)
		return nil, fmt.Errorf("restoring the records in flight: operator entry %d is %w", i, err)
	}
	return a, nil
}

// issue starts the request of in.
func (a *asyncOp[IN, OUT]) issue(in IN) {
	r := &asyncRequest[IN, OUT]{in: in}
	a.queue = append(a.queue, r)
	a.running.Add(1)
	go func() {
		defer a.running.Done()
		r.result, r.attempts, r.err = a.call(in)
		r.done.Store(true)
		select {
		case a.completed <- struct{}{}:
		default:
		}
	}()
}

// call runs fn on in, Attempts times at most, with Timeout per attempt
// and Backoff, doubled each time, between two; it returns the result and
// how many attempts it took.
func (a *asyncOp[IN, OUT]) call(in IN) (out OUT, attempts int, err error) {
	backoff := a.o.Backoff
	for attempt := 1; ; attempt++ {
		out, err = a.attempt(in)
		if err == nil || attempt == a.o.Attempts || a.ctx.Err() != nil {
			if err != nil {
				err = fmt.Errorf("AsyncMap %q: the request failed %d times, the last time with: %w", a.name, attempt, err)
			}
			return out, attempt, err
		}
		select {
		case <-time.After(backoff):
		case <-a.ctx.Done():
		}
		backoff *= 2
	}
}

// attempt calls fn once, turning a panic into an error.
func (a *asyncOp[IN, OUT]) attempt(in IN) (out OUT, err error) {
	ctx, cancel := context.WithTimeout(a.ctx, a.o.Timeout)
	defer cancel()
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%w: %v", errAsyncPanic, p)
		}
	}()
	return a.fn(ctx, in)
}

// Process issues a request per record, first waiting, while Capacity
// requests are in flight, for one to be emitted.
func (a *asyncOp[IN, OUT]) Process(ctx context.Context, batch any) error {
	in, err := batchOf[IN](batch)
	if err != nil {
		return err
	}
	for _, v := range in {
		for len(a.queue) >= a.o.Capacity {
			if err := a.await(ctx); err != nil {
				return err
			}
		}
		a.issue(v)
	}
	return nil
}

// await waits for a request to complete and emits what may be emitted.
func (a *asyncOp[IN, OUT]) await(ctx context.Context) error {
	select {
	case <-a.completed:
	case <-ctx.Done():
		return ctx.Err()
	}
	return a.EmitCompleted(ctx)
}

// Completions fires when a request completed.
func (a *asyncOp[IN, OUT]) Completions() <-chan struct{} { return a.completed }

// EmitCompleted emits the results of the completed requests: in input
// order up to the first one still in flight, or, Unordered, all of them.
// A request that failed goes to the Failures side output, or fails the
// operator without one. A request cut short because the operator closes
// is never a failure: Close comes only after the last EmitCompleted.
func (a *asyncOp[IN, OUT]) EmitCompleted(context.Context) error {
	a.buf = a.buf[:0]
	kept := a.queue[:0]
	blocked := false
	for _, r := range a.queue {
		switch {
		case blocked || !r.done.Load():
			kept = append(kept, r)
			blocked = blocked || !a.o.Unordered
		case r.err != nil && a.failures == nil:
			return r.err
		case r.err != nil:
			emitSide(&a.sides, *a.failures, AsyncFailure[IN]{Input: r.in, Err: r.err.Error(), Attempts: r.attempts})
		default:
			a.buf = append(a.buf, r.result)
		}
	}
	clear(a.queue[len(kept):])
	a.queue = kept
	if len(a.buf) > 0 {
		if err := a.out.Emit(a.buf); err != nil {
			return err
		}
	}
	return a.sides.flush(a.oc.SideOutputs)
}

// Watermark emits every result before the watermark goes on: it waits
// for every request in flight. The end of the stream is the last
// watermark.
func (a *asyncOp[IN, OUT]) Watermark(ctx context.Context, _ int64) error {
	for len(a.queue) > 0 {
		if err := a.await(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Snapshot records the input records whose results were not emitted,
// in order: a restore issues their requests again.
func (a *asyncOp[IN, OUT]) Snapshot(context.Context, checkpoint.ID) (func() (checkpoint.SubtaskSnapshot, error), error) {
	entries := make([][]byte, 0, len(a.queue))
	for _, r := range a.queue {
		b, err := state.AppendChecked(a.codec, nil, r.in)
		if err != nil {
			return nil, fmt.Errorf("AsyncMap %q: encoding a record in flight: %w", a.name, err)
		}
		entries = append(entries, format.EncodeAsyncInput(b))
	}
	return func() (checkpoint.SubtaskSnapshot, error) {
		return checkpoint.SubtaskSnapshot{Entries: entries}, nil
	}, nil
}

// Close cancels the requests in flight and waits for them to return.
func (a *asyncOp[IN, OUT]) Close(context.Context, checkpoint.ID, bool) error {
	a.cancel()
	a.running.Wait()
	return nil
}
