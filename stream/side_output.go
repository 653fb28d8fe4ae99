package stream

import (
	"fmt"
	"reflect"

	"github.com/exactlyonce/exactly/internal/runtime"
)

// OutputTag names a side output carrying records of type T: a second
// stream out of a [Process] or [WindowAggregate] operator, next to its main
// output. Emit to it with [EmitTo]; take it as a stream with [SideOutput].
// Tags are identified by name within an operator.
type OutputTag[T any] struct{ name string }

// NewOutputTag returns the tag of a side output called name. The name must
// not be empty, and an operator's side outputs of different types need
// different names.
func NewOutputTag[T any](name string) OutputTag[T] { return OutputTag[T]{name: name} }

// EmitTo sends v to the side output tag of the operator whose process
// function received out. Records emitted to a tag that no [SideOutput]
// took are dropped, as the main output is when nothing reads it.
func EmitTo[OUT, T any](out *Output[OUT], tag OutputTag[T], v T) { emitSide(&out.sides, tag, v) }

// emitSide buffers v for the side output tag of s; a tag no SideOutput
// took drops it.
func emitSide[T any](s *sideOutputs, tag OutputTag[T], v T) {
	for i, name := range s.names {
		if name != tag.name {
			continue
		}
		b, ok := s.bufs[i].(*sideBuffer[T])
		if !ok {
			if s.err == nil {
				s.err = fmt.Errorf("stream: EmitTo: side output %q carries %v records, not %v: give tags of different types different names", tag.name, s.types[i], reflect.TypeFor[T]())
			}
			return
		}
		b.recs = append(b.recs, v)
		return
	}
}

// SideOutput returns the records emitted to tag by the operator producing
// s (see [EmitTo]) as a stream of its own, for example to give the late
// records of a window ([LateRecords]) or the failed requests of an
// [AsyncMap] ([AsyncOptions].Failures) a sink. s must be the main output
// of a [Process], a [WindowAggregate], a join or an AsyncMap. The side output travels with the main
// output: its records are covered by the same checkpoints, so a sink on it
// is exactly-once like any other.
func SideOutput[OUT, T any](s Stream[OUT], tag OutputTag[T]) Stream[T] {
	j := s.job
	nd := j.nodes[s.op]
	switch {
	case tag.name == "":
		j.fail("SideOutput of %q: the output tag has no name: make it with NewOutputTag(name)", nd.spec.Name)
		return Stream[T]{job: j, op: s.op}
	case !nd.sideOutputs || s.output != 0:
		j.fail("SideOutput %q of %q: only the main output of Process, WindowAggregate, a join or AsyncMap has side outputs", tag.name, nd.spec.Name)
		return Stream[T]{job: j, op: s.op}
	}
	typ := reflect.TypeFor[T]()
	for i, st := range nd.sides {
		if st.name != tag.name {
			continue
		}
		if st.typ != typ {
			j.fail("SideOutput %q of %q: taken as %v records and as %v records: give tags of different types different names", tag.name, nd.spec.Name, st.typ, typ)
		}
		return Stream[T]{job: j, op: s.op, output: 1 + i}
	}
	nd.sides = append(nd.sides, sideTag{name: tag.name, typ: typ, newBuffer: func(n int) sideFlusher {
		return &sideBuffer[T]{recs: make([]T, 0, n)}
	}})
	nd.spec.SideOutputs = len(nd.sides)
	return Stream[T]{job: j, op: s.op, output: len(nd.sides)}
}

// sideTag is a side output of an operator, as [SideOutput] declared it.
type sideTag struct {
	name      string
	typ       reflect.Type
	newBuffer func(batchSize int) sideFlusher
}

// sideOutputs are the buffers of an operator subtask's side outputs, in the
// order of its sideTags, and the first misuse of one.
type sideOutputs struct {
	names []string
	types []reflect.Type
	bufs  []sideFlusher
	err   error
}

func newSideOutputs(tags []sideTag, batchSize int) sideOutputs {
	var s sideOutputs
	for _, t := range tags {
		s.names = append(s.names, t.name)
		s.types = append(s.types, t.typ)
		s.bufs = append(s.bufs, t.newBuffer(batchSize))
	}
	return s
}

// flush emits every buffered record to its side output, or reports the
// first misuse.
func (s *sideOutputs) flush(outs []runtime.Emitter) error {
	if s.err != nil {
		return s.err
	}
	for i, b := range s.bufs {
		if err := b.flush(outs[i]); err != nil {
			return err
		}
	}
	return nil
}

// sideFlusher is a side output's buffer of records of its type.
type sideFlusher interface {
	flush(out runtime.Emitter) error
}

type sideBuffer[T any] struct{ recs []T }

func (b *sideBuffer[T]) flush(out runtime.Emitter) error {
	if len(b.recs) == 0 {
		return nil
	}
	err := out.Emit(b.recs)
	b.recs = b.recs[:0]
	return err
}
