package stream

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/internal/stages"
	"github.com/exactlyonce/exactly/state"
)

// shuffle is what a stage cut needs of the records of a key shuffle (a
// hash edge, see [KeyedStream]): how to compute their key groups and to
// encode them for a repartition topic, and how to decode them on the
// other side.
type shuffle interface {
	// check reports why the records cannot cross a process boundary.
	check() error
	// encoder adds to j an operator that turns the records of the stream
	// (op, output) into envelopes, named name.
	encoder(j *Job, op, output int, name string, maxParallelism int) Stream[stages.Envelope]
	// decoder adds to j an operator that decodes the encoded records of s,
	// named name, and returns its index.
	decoder(s Stream[[]byte], name string) int
}

// keyShuffle is the shuffle of a KeyedStream[K, T]. Records travel as
// JSON, so that a user's job crosses stages without a codec of its own.
type keyShuffle[K comparable, T any] struct {
	key   func(T) K
	codec state.Codec[K]
}

func (s keyShuffle[K, T]) check() error {
	t := reflect.TypeFor[T]()
	if err := jsonSafe(t, t.String(), map[reflect.Type]bool{}); err != nil {
		return fmt.Errorf("stream: the records of a KeyBy are %v, which cannot cross to another stage as JSON: %w; export the field or change its type, or run the job in one process", t, err)
	}
	return nil
}

// jsonParter is a type of the engine's own that encodes itself as JSON
// from values of the types jsonParts lists (the records of a join's two
// inputs), which must be JSON-safe in turn.
type jsonParter interface{ jsonParts() []reflect.Type }

// jsonSafe reports a part of type t, named path, that JSON cannot carry
// through a round trip: an unexported struct field, a func, a channel, an
// interface (decoded as a map, not its type), a complex number.
func jsonSafe(t reflect.Type, path string, seen map[reflect.Type]bool) error {
	if seen[t] {
		return nil
	}
	seen[t] = true
	if p, ok := reflect.Zero(t).Interface().(jsonParter); ok {
		for _, part := range p.jsonParts() {
			if err := jsonSafe(part, path+"("+part.String()+")", seen); err != nil {
				return err
			}
		}
		return nil
	}
	if t.Implements(reflect.TypeFor[json.Marshaler]()) || reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
		return nil // the type encodes itself
	}
	switch t.Kind() {
	case reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return fmt.Errorf("%s is a %v", path, t.Kind())
	case reflect.Interface:
		return fmt.Errorf("%s is an interface (%v), which JSON decodes as a map, not as the value it held", path, t)
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return jsonSafe(t.Elem(), path+"[]", seen)
	case reflect.Map:
		return jsonSafe(t.Elem(), path+"[…]", seen)
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Tag.Get("json") == "-" {
				continue
			}
			if !f.IsExported() {
				return fmt.Errorf("%s.%s is not exported, and JSON drops it", path, f.Name)
			}
			if err := jsonSafe(f.Type, path+"."+f.Name, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s keyShuffle[K, T]) encoder(j *Job, op, output int, name string, maxParallelism int) Stream[stages.Envelope] {
	in := Stream[T]{job: j, op: op, output: output}
	nd := &node{inherit: true, spec: runtime.OperatorSpec{
		Name:   name,
		Inputs: []runtime.Input{in.input()},
		New: func(ctx context.Context, oc runtime.OperatorContext, out runtime.Emitter) (runtime.Operator, error) {
			return &encodeOp[K, T]{s: s, maxParallelism: maxParallelism, out: out}, nil
		},
	}}
	return Stream[stages.Envelope]{job: j, op: j.add(nd, nil)}
}

func (s keyShuffle[K, T]) decoder(in Stream[[]byte], name string) int {
	nd := &node{inherit: true, spec: runtime.OperatorSpec{
		Name:   name,
		Inputs: []runtime.Input{in.input()},
		New: func(ctx context.Context, oc runtime.OperatorContext, out runtime.Emitter) (runtime.Operator, error) {
			return &decodeOp[T]{out: out}, nil
		},
	}}
	return in.job.add(nd, nil)
}

// encodeOp encodes records into envelopes.
type encodeOp[K comparable, T any] struct {
	s              keyShuffle[K, T]
	maxParallelism int
	out            runtime.Emitter
	key            []byte
	buf            []stages.Envelope
}

func (e *encodeOp[K, T]) Process(_ context.Context, batch any) error {
	in, err := batchOf[T](batch)
	if err != nil {
		return err
	}
	e.buf = e.buf[:0]
	for _, v := range in {
		e.key = e.s.codec.Append(e.key[:0], e.s.key(v))
		data, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("stream: encoding a record for the next stage: %w", err)
		}
		e.buf = append(e.buf, stages.Envelope{KeyGroup: state.KeyGroupOf(state.HashKey(e.key), e.maxParallelism), Value: data})
	}
	return e.out.Emit(e.buf)
}

// decodeOp decodes the records of a repartition topic. A record that does
// not decode fails the job: the topic holds only what an upstream stage of
// the same job wrote, so such a record is a defect or another job's, never
// input to skip.
type decodeOp[T any] struct {
	out runtime.Emitter
	buf []T
}

func (d *decodeOp[T]) Process(_ context.Context, batch any) error {
	in, err := batchOf[[]byte](batch)
	if err != nil {
		return err
	}
	d.buf = d.buf[:0]
	for _, data := range in {
		var v T
		if err := json.Unmarshal(data, &v); err != nil {
			return fmt.Errorf("stream: decoding a record of the previous stage as %T: %w (record %.200q)", v, err, data)
		}
		d.buf = append(d.buf, v)
	}
	return d.out.Emit(d.buf)
}
