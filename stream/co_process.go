package stream

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/exactlyonce/exactly/internal/runtime"
)

// CoProcessFunc is a keyed process function of two inputs: the functions a
// [CoProcess] operator calls for each record of either input and for each
// timer. Both inputs share the key's state and timers.
type CoProcessFunc[K comparable, A, B, OUT any] struct {
	// Process1 handles one record of the first input. Required.
	Process1 func(ctx *Context[K], a A, out *Output[OUT]) error
	// Process2 handles one record of the second input. Required.
	Process2 func(ctx *Context[K], b B, out *Output[OUT]) error
	// OnTimer handles a processing-time timer of ctx.Key(), whichever
	// input's record registered it. Optional, as in [ProcessFunc].
	OnTimer func(ctx *Context[K], when time.Time, out *Output[OUT]) error
	// OnEventTimer handles an event-time timer of ctx.Key(), called when
	// the watermark of both inputs, the least of the two, reaches when.
	// Optional, as in [ProcessFunc].
	OnEventTimer func(ctx *Context[K], when time.Time, out *Output[OUT]) error
}

// CoProcess runs a keyed process function on two keyed streams with the
// same key type (Flink's KeyedCoProcessFunction): the records of both with
// equal keys meet in one subtask, where they read and write the same keyed
// state. setup is called once per subtask, as for [Process].
//
// The operator's watermark is the least of its two inputs' watermarks, so
// a watermark of one input alone fires no event-time timer the other could
// still hold back; a checkpoint barrier is aligned over both inputs, so
// the state a checkpoint holds reflects exactly the records before the
// barrier on each. Both streams must be keyed with the same codec, so that
// equal keys hash to the same key group. name must be unique and stable:
// the state is checkpointed under it.
func CoProcess[K comparable, A, B, OUT any](a KeyedStream[K, A], b KeyedStream[K, B], name string,
	setup func(ctx *Context[K]) (CoProcessFunc[K, A, B, OUT], error), opts ...KeyedOption) Stream[OUT] {
	j := a.s.job
	if setup == nil {
		j.fail("CoProcess %q: the setup function is nil: give the function that declares the state and returns the CoProcessFunc", name)
	}
	return connect(a, b, "CoProcess", name, func(ctx *Context[K]) (ProcessFunc[K, either[A, B], OUT], error) {
		fn, err := setup(ctx)
		if err != nil {
			return ProcessFunc[K, either[A, B], OUT]{}, err
		}
		if fn.Process1 == nil || fn.Process2 == nil {
			return ProcessFunc[K, either[A, B], OUT]{}, fmt.Errorf("setup returned a CoProcessFunc without Process1 or Process2: set both")
		}
		return ProcessFunc[K, either[A, B], OUT]{
			Process: func(ctx *Context[K], v either[A, B], out *Output[OUT]) error {
				if v.second {
					return fn.Process2(ctx, v.b, out)
				}
				return fn.Process1(ctx, v.a, out)
			},
			OnTimer:      fn.OnTimer,
			OnEventTimer: fn.OnEventTimer,
		}, nil
	}, opts)
}

// either is a record of one of the two inputs of a two-input keyed
// operator: b when second is set, otherwise a.
type either[A, B any] struct {
	a      A
	b      B
	second bool
}

// connect adds the keyed operator of two inputs whose process function
// setup returns: each input is tagged into an either, in its producer's
// task, then hash-partitioned into the operator. The runtime aligns
// barriers over, and merges the watermarks of, every input of a task, so
// the two tagged edges are one operator's inputs like those of a union.
// kind names the public operator in errors.
func connect[K comparable, A, B, OUT any](a KeyedStream[K, A], b KeyedStream[K, B], kind, name string,
	setup func(ctx *Context[K]) (ProcessFunc[K, either[A, B], OUT], error), opts []KeyedOption) Stream[OUT] {
	j := a.s.job
	switch {
	case b.s.job != j:
		j.fail("%s %q: the two inputs belong to different jobs: build both in the same job", kind, name)
	case a.codec == nil || b.codec == nil:
		// KeyBy reported it.
	case reflect.TypeOf(a.codec) != reflect.TypeOf(b.codec):
		j.fail("%s %q: the inputs are keyed with different codecs (%T and %T): key both with the same codec, so that equal keys meet in one subtask", kind, name, a.codec, b.codec)
	}
	keyA, keyB := a.key, b.key
	key := func(v either[A, B]) K {
		if v.second {
			return keyB(v.b)
		}
		return keyA(v.a)
	}
	inputs := []runtime.Input{
		KeyedStream[K, either[A, B]]{s: tagFirst[A, B](a.s, "co-in1"), key: key, codec: a.codec}.input(),
		KeyedStream[K, either[A, B]]{s: tagSecond[A](b.s, "co-in2"), key: key, codec: a.codec}.input(),
	}
	return keyedProcess[OUT](j, runtime.OperatorSpec{Name: name, Inputs: inputs}, opts, func(oc runtime.OperatorContext, out runtime.Emitter, sides []sideTag) (runtime.Operator, error) {
		return newProcessOp(oc, key, a.codec, setup, out, j.stateBackend, sides)
	})
}

// tagFirst tags the records of s as the first input of a two-input
// operator, in s's producer's task; kind names the transform.
func tagFirst[A, B any](s Stream[A], kind string) Stream[either[A, B]] {
	return transform(s, kind, func(in []A, out []either[A, B]) []either[A, B] {
		for _, v := range in {
			out = append(out, either[A, B]{a: v})
		}
		return out
	}, nil)
}

// tagSecond tags the records of s as the second input of a two-input
// operator, like tagFirst.
func tagSecond[A, B any](s Stream[B], kind string) Stream[either[A, B]] {
	return transform(s, kind, func(in []B, out []either[A, B]) []either[A, B] {
		for _, v := range in {
			out = append(out, either[A, B]{b: v, second: true})
		}
		return out
	}, nil)
}

// eitherJSON is the JSON form of an either, which crosses to another
// stage of a job run on a cluster: the value of the input it came from.
type eitherJSON[A, B any] struct {
	A      *A   `json:"a,omitempty"`
	B      *B   `json:"b,omitempty"`
	Second bool `json:"second,omitempty"`
}

// MarshalJSON encodes the value of the input e came from.
func (e either[A, B]) MarshalJSON() ([]byte, error) {
	if e.second {
		return json.Marshal(eitherJSON[A, B]{B: &e.b, Second: true})
	}
	return json.Marshal(eitherJSON[A, B]{A: &e.a})
}

// UnmarshalJSON decodes what MarshalJSON encoded.
func (e *either[A, B]) UnmarshalJSON(data []byte) error {
	var j eitherJSON[A, B]
	if err := json.Unmarshal(data, &j); err != nil {
		return err
	}
	*e = either[A, B]{second: j.Second}
	if j.A != nil {
		e.a = *j.A
	}
	if j.B != nil {
		e.b = *j.B
	}
	return nil
}

// jsonParts returns the types an either's JSON holds, for jsonSafe.
func (either[A, B]) jsonParts() []reflect.Type {
	return []reflect.Type{reflect.TypeFor[A](), reflect.TypeFor[B]()}
}
