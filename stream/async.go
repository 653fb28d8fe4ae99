package stream

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/state"
)

// AsyncOptions configure [AsyncMap].
type AsyncOptions struct {
	// Capacity is the most requests a subtask has in flight (issued, or
	// completed and waiting to be emitted in order); a full subtask stops
	// reading its input until one is emitted. Default 100.
	Capacity int
	// Unordered emits each result as soon as its request completes. By
	// default results keep the order of their inputs. Either way a result
	// is emitted before the watermarks and the end of the stream that
	// followed its input.
	Unordered bool
	// Timeout bounds each attempt of a request: fn's context is cancelled
	// then. Default 30s.
	Timeout time.Duration
	// Attempts is how many times a request is tried before its error
	// fails the job, which restarts from its last checkpoint and issues
	// the request again. Default 3.
	Attempts int
	// Backoff is the wait before the second attempt, doubled before each
	// next one. Default 100ms.
	Backoff time.Duration
	// Failures, when set, is an OutputTag[AsyncFailure[IN]] (IN the
	// input's type): a request that failed every attempt (or panicked)
	// sends its record, the error and the attempts to that side output,
	// in its place among the results, instead of failing the job; take
	// it with [SideOutput] and give it a sink (a dead-letter stream,
	// exactly-once like any output). Default nil: a failed request fails
	// the job.
	Failures any
}

// AsyncFailure is a record whose [AsyncMap] request failed every attempt,
// on the side output of [AsyncOptions].Failures.
type AsyncFailure[IN any] struct {
	// Input is the record.
	Input IN
	// Err is the last attempt's error message.
	Err string
	// Attempts is how many times the request was tried.
	Attempts int
}

// Defaults of AsyncOptions.
const (
	DefaultAsyncCapacity = 100
	DefaultAsyncTimeout  = 30 * time.Second
	DefaultAsyncAttempts = 3
	DefaultAsyncBackoff  = 100 * time.Millisecond
)

// withDefaults fills in the defaults; it reports the first bad field.
func (o AsyncOptions) withDefaults() (AsyncOptions, error) {
	for _, f := range []struct {
		name  string
		value int64
	}{{"Capacity", int64(o.Capacity)}, {"Timeout", int64(o.Timeout)}, {"Attempts", int64(o.Attempts)}, {"Backoff", int64(o.Backoff)}} {
		if f.value < 0 {
			return o, fmt.Errorf("AsyncOptions.%s is negative (%d): use 0 for the default or a positive value", f.name, f.value)
		}
	}
	if o.Capacity == 0 {
		o.Capacity = DefaultAsyncCapacity
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultAsyncTimeout
	}
	if o.Attempts == 0 {
		o.Attempts = DefaultAsyncAttempts
	}
	if o.Backoff == 0 {
		o.Backoff = DefaultAsyncBackoff
	}
	return o, nil
}

// AsyncMap calls fn for every record of s without waiting for one call
// to return before the next starts: up to Capacity calls per subtask run
// at once (Flink's AsyncDataStream), for lookups against an external
// service. fn must return when its context is cancelled.
//
// It is exactly-once like any operator: a checkpoint holds the input
// records (encoded with codec) whose results were not emitted yet, and a
// restore issues their requests again, before any other input. So fn may
// be called more than once for a record (after a failure, and for each
// attempt); each result is emitted once in the committed output. fn
// should be a lookup, or a call that is idempotent: its effects outside
// the job are not rolled back. A panic in fn fails the job like an error.
// name must be unique and stable: the records in flight are checkpointed
// under it.
func AsyncMap[IN, OUT any](s Stream[IN], name string, codec state.Codec[IN], fn func(ctx context.Context, in IN) (OUT, error), o AsyncOptions, opts ...TransformOption) Stream[OUT] {
	j := s.job
	o, err := o.withDefaults()
	switch {
	case err != nil:
		j.fail("AsyncMap %q: %v", name, err)
	case fn == nil:
		j.fail("AsyncMap %q: the function is nil", name)
	case codec == nil:
		j.fail("AsyncMap %q: the codec is nil: give the input's codec, with which the records in flight are checkpointed", name)
	}
	var failures *OutputTag[AsyncFailure[IN]]
	if o.Failures != nil {
		tag, ok := o.Failures.(OutputTag[AsyncFailure[IN]])
		if !ok {
			in := reflect.TypeFor[IN]()
			j.fail("AsyncMap %q: AsyncOptions.Failures is a %T, but the input's records are %v: make the tag with NewOutputTag[AsyncFailure[%v]]", name, o.Failures, in, in)
		}
		failures = &tag
	}
	nd := &node{inherit: true, sideOutputs: true}
	nd.spec = runtime.OperatorSpec{
		Name:    name,
		Inputs:  []runtime.Input{s.input()},
		OwnTask: true,
		New: func(ctx context.Context, oc runtime.OperatorContext, out runtime.Emitter) (runtime.Operator, error) {
			return newAsyncOp(oc, codec, fn, o, out, failures, nd.sides)
		},
	}
	return Stream[OUT]{job: j, op: j.add(nd, options(opts, TransformOption.applyTransform))}
}

// errAsyncPanic wraps a panic of an AsyncMap function.
var errAsyncPanic = errors.New("the function panicked")
