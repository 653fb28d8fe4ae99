package stream

import (
	"context"
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/source"
	"github.com/exactlyonce/exactly/state"
)

// Stream is a stream of records of type T in a job under construction.
type Stream[T any] struct {
	job    *Job
	op     int
	output int // 0: op's main output; i: its side output i (SideOutput)
	part   runtime.Partitioning
}

// Rebalance returns the same stream, dealt round-robin to the consumer's
// subtasks instead of forwarded subtask to subtask.
func (s Stream[T]) Rebalance() Stream[T] {
	s.part = runtime.Rebalance
	return s
}

// input returns the edge from s into a new operator.
func (s Stream[T]) input() runtime.Input {
	part := s.part
	return runtime.Input{
		From:         s.op,
		Output:       s.output,
		Partitioning: part,
		NewRouter: func(ctx context.Context, outs []chan<- runtime.Message, batchSize, maxParallelism int) runtime.Router {
			return runtime.NewRouter[T](ctx, part, outs, batchSize, maxParallelism, nil)
		},
	}
}

// Source adds a source to the job. name must be unique and stable: the
// source's positions are checkpointed under it.
func Source[T any](j *Job, name string, src source.Source[T], opts ...SourceOption) Stream[T] {
	return addSource(j, name, src, nil, opts)
}

// EventTime tells a source how to track event time, the time at which the
// events its records describe happened.
type EventTime[T any] struct {
	// Timestamp returns a record's event time. Required.
	Timestamp func(T) time.Time
	// MaxOutOfOrderness is how far a record's event time may lag behind the
	// newest one read from its split before the record is late: each
	// split's watermark trails its newest event time by this much. Default
	// 0: splits are in event-time order.
	MaxOutOfOrderness time.Duration
	// IdleTimeout makes a split that yielded no record for this long idle:
	// it stops holding the watermark back until it yields again. Idleness
	// depends on timing, so records of a split that wakes up may be late in
	// one run and on time in another. Default 0: splits never go idle
	// (a subtask without splits is always idle).
	IdleTimeout time.Duration
}

// SourceWithEventTime adds a source whose records carry event time: each
// subtask tracks the event time of its splits and sends watermarks
// downstream, which close event-time windows ([WindowAggregate]) and fire
// event-time timers. When a bounded source ends, event time ends: every
// window closes.
func SourceWithEventTime[T any](j *Job, name string, src source.Source[T], et EventTime[T], opts ...SourceOption) Stream[T] {
	switch {
	case et.Timestamp == nil:
		j.fail("source %q: EventTime.Timestamp is nil: give the function returning a record's event time", name)
	case et.MaxOutOfOrderness < 0:
		j.fail("source %q: EventTime.MaxOutOfOrderness = %v is negative: use 0 or a positive duration", name, et.MaxOutOfOrderness)
	case et.IdleTimeout < 0:
		j.fail("source %q: EventTime.IdleTimeout = %v is negative: use 0 (never idle) or a positive duration", name, et.IdleTimeout)
	}
	return addSource(j, name, src, &et, opts)
}

func addSource[T any](j *Job, name string, src source.Source[T], et *EventTime[T], opts []SourceOption) Stream[T] {
	if src == nil {
		j.fail("source %q is nil", name)
	}
	nd := &node{source: src, eventTime: et != nil}
	nd.withSource = func(v any) (runtime.OperatorSpec, error) {
		src, ok := v.(source.Source[T])
		if !ok {
			return runtime.OperatorSpec{}, fmt.Errorf("stream: source %q: its replacement is a %T, not a source.Source[%T]", name, v, *new(T))
		}
		return runtime.OperatorSpec{
			Name: name,
			NewSource: func(ctx context.Context, oc runtime.OperatorContext, out runtime.Emitter) (runtime.SourceOperator, error) {
				return newSourceOp(ctx, oc, src, et, out)
			},
			Check: checkOf(src),
		}, nil
	}
	nd.spec, _ = nd.withSource(src)
	return Stream[T]{job: j, op: j.add(nd, options(opts, SourceOption.applySource))}
}

// transform adds a stateless, chainable operator applying apply to each batch.
func transform[IN, OUT any](s Stream[IN], kind string, apply func(in []IN, out []OUT) []OUT, opts []TransformOption) Stream[OUT] {
	nd := &node{inherit: true, spec: runtime.OperatorSpec{
		Name:   fmt.Sprintf("%s-%d", kind, len(s.job.nodes)),
		Inputs: []runtime.Input{s.input()},
		New: func(ctx context.Context, oc runtime.OperatorContext, out runtime.Emitter) (runtime.Operator, error) {
			return &transformOp[IN, OUT]{apply: apply, out: out, buf: make([]OUT, 0, oc.BatchSize)}, nil
		},
	}}
	return Stream[OUT]{job: s.job, op: s.job.add(nd, options(opts, TransformOption.applyTransform))}
}

// Map applies fn to every record.
func Map[IN, OUT any](s Stream[IN], fn func(IN) OUT, opts ...TransformOption) Stream[OUT] {
	if fn == nil {
		s.job.fail("Map: the function is nil")
	}
	return transform(s, "map", func(in []IN, out []OUT) []OUT {
		for _, v := range in {
			out = append(out, fn(v))
		}
		return out
	}, opts)
}

// Filter keeps the records for which keep returns true.
func Filter[T any](s Stream[T], keep func(T) bool, opts ...TransformOption) Stream[T] {
	if keep == nil {
		s.job.fail("Filter: the function is nil")
	}
	return transform(s, "filter", func(in []T, out []T) []T {
		for _, v := range in {
			if keep(v) {
				out = append(out, v)
			}
		}
		return out
	}, opts)
}

// FlatMap replaces every record by the records fn appends to out.
func FlatMap[IN, OUT any](s Stream[IN], fn func(in IN, out []OUT) []OUT, opts ...TransformOption) Stream[OUT] {
	if fn == nil {
		s.job.fail("FlatMap: the function is nil")
	}
	return transform(s, "flatmap", func(in []IN, out []OUT) []OUT {
		for _, v := range in {
			out = fn(v, out)
		}
		return out
	}, opts)
}

// Union merges streams of the same type into one.
func Union[T any](first Stream[T], rest ...Stream[T]) Stream[T] {
	inputs := []runtime.Input{first.input()}
	for _, s := range rest {
		if s.job != first.job {
			first.job.fail("Union: the streams belong to different jobs")
		}
		inputs = append(inputs, s.input())
	}
	nd := &node{inherit: true, spec: runtime.OperatorSpec{
		Name:   fmt.Sprintf("union-%d", len(first.job.nodes)),
		Inputs: inputs,
		New: func(ctx context.Context, oc runtime.OperatorContext, out runtime.Emitter) (runtime.Operator, error) {
			return passOp{out}, nil
		},
	}}
	return Stream[T]{job: first.job, op: first.job.add(nd, nil)}
}

// KeyedStream is a stream partitioned by a key of type K: every record with
// a given key goes to the same subtask of the next operator.
type KeyedStream[K comparable, T any] struct {
	s     Stream[T]
	key   func(T) K
	codec state.Codec[K]
}

// KeyBy partitions s by the key that key returns. codec encodes keys for
// hashing and for checkpoints; the package state has codecs for the common
// types (state.StringCodec, state.Int64Codec...).
func KeyBy[T any, K comparable](s Stream[T], key func(T) K, codec state.Codec[K]) KeyedStream[K, T] {
	if key == nil || codec == nil {
		s.job.fail("KeyBy: the key function and the key codec are required")
	}
	return KeyedStream[K, T]{s: s, key: key, codec: codec}
}

// input returns the hash-partitioned edge from the keyed stream.
func (ks KeyedStream[K, T]) input() runtime.Input {
	return runtime.Input{
		From:         ks.s.op,
		Output:       ks.s.output,
		Partitioning: runtime.Hash,
		NewRouter: func(ctx context.Context, outs []chan<- runtime.Message, batchSize, maxParallelism int) runtime.Router {
			var buf []byte
			keyGroup := func(v T) int {
				buf = ks.codec.Append(buf[:0], ks.key(v))
				return state.KeyGroupOf(state.HashKey(buf), maxParallelism)
			}
			return runtime.NewRouter(ctx, runtime.Hash, outs, batchSize, maxParallelism, keyGroup)
		},
		Shuffle: keyShuffle[K, T]{key: ks.key, codec: ks.codec},
	}
}

// transformOp applies a batch function and emits the result.
type transformOp[IN, OUT any] struct {
	apply func(in []IN, out []OUT) []OUT
	out   runtime.Emitter
	buf   []OUT
}

func (t *transformOp[IN, OUT]) Process(_ context.Context, batch any) error {
	in, err := batchOf[IN](batch)
	if err != nil {
		return err
	}
	t.buf = t.apply(in, t.buf[:0])
	if len(t.buf) == 0 {
		return nil
	}
	return t.out.Emit(t.buf)
}

// passOp forwards batches unchanged (the union point).
type passOp struct{ out runtime.Emitter }

func (p passOp) Process(_ context.Context, batch any) error { return p.out.Emit(batch) }

// batchOf converts a batch to its record type.
func batchOf[T any](batch any) ([]T, error) {
	b, ok := batch.([]T)
	if !ok {
		return nil, fmt.Errorf("stream: internal error: got a batch of %T, want %T", batch, b)
	}
	return b, nil
}
