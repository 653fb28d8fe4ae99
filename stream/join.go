package stream

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/state"
)

// JoinInputs describes the records of a join's two inputs: their event
// times and how the join keeps them in checkpointed state while they wait
// for their matches.
type JoinInputs[A, B any] struct {
	// Time1 and Time2 return the event time of a record of the first and
	// the second input. Required by [IntervalJoin] and [WindowJoin]
	// (give the same functions as the inputs' [EventTime].Timestamp),
	// unused by [InnerJoin].
	Time1 func(A) time.Time
	Time2 func(B) time.Time
	// Codec1 and Codec2 encode the records of each input in checkpoints.
	// Required.
	Codec1 state.Codec[A]
	Codec2 state.Codec[B]
	// Late1 and Late2, when set, receive the late records of each input
	// (records at or behind the watermark when they arrive; see
	// [IntervalJoin] and [WindowJoin]) as side outputs of the join's
	// stream: take them with [SideOutput]. Unset, late records are
	// dropped; either way they are counted in [Metrics].LateRecords.
	// [InnerJoin] has no late records.
	Late1 OutputTag[A]
	Late2 OutputTag[B]
}

// emitLate sends the late record v of either input to that input's side
// output, if the join has one (EmitTo drops a record of an unset tag).
func emitLate[A, B, OUT any](in JoinInputs[A, B], v either[A, B], out *Output[OUT]) {
	if v.second {
		EmitTo(out, in.Late2, v.b)
	} else {
		EmitTo(out, in.Late1, v.a)
	}
}

// invalid says what is missing from in for a join of the kind (needing
// event times when eventTime is set), or returns "".
func (in JoinInputs[A, B]) invalid(eventTime bool) string {
	switch {
	case eventTime && (in.Time1 == nil || in.Time2 == nil):
		return "JoinInputs.Time1 or Time2 is nil: give the functions returning each input's event time"
	case in.Codec1 == nil || in.Codec2 == nil:
		return "JoinInputs.Codec1 or Codec2 is nil: give the codecs of both inputs' records (state.JSONCodec works for any type)"
	}
	return ""
}

// checkJoin records the first problem of a join's arguments as the job's
// error: the inputs, then the join function.
func checkJoin[A, B any](j *Job, kind, name string, in JoinInputs[A, B], eventTime, joinNil bool) {
	switch {
	case in.invalid(eventTime) != "":
		j.fail("%s %q: %s", kind, name, in.invalid(eventTime))
	case joinNil:
		j.fail("%s %q: the join function is nil: give the function that turns a matching pair into output", kind, name)
	}
}

// listCodec encodes a list of records as a uvarint count, then each
// record's length as a uvarint and its encoding.
type listCodec[T any] struct{ elem state.Codec[T] }

func (c listCodec[T]) Append(dst []byte, vs []T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(vs)))
	var buf []byte
	for _, v := range vs {
		buf = c.elem.Append(buf[:0], v)
		dst = binary.AppendUvarint(dst, uint64(len(buf)))
		dst = append(dst, buf...)
	}
	return dst
}

func (c listCodec[T]) Decode(src []byte) ([]T, error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)) {
		return nil, fmt.Errorf("%w: record list: bad count", state.ErrMalformed)
	}
	src = src[k:]
	vs := make([]T, 0, n)
	for range n {
		l, k := binary.Uvarint(src)
		if k <= 0 || l > uint64(len(src)-k) {
			return nil, fmt.Errorf("%w: record list: bad length", state.ErrMalformed)
		}
		v, err := c.elem.Decode(src[k : k+int(l)])
		if err != nil {
			return nil, err
		}
		vs = append(vs, v)
		src = src[k+int(l):]
	}
	if len(src) != 0 {
		return nil, fmt.Errorf("%w: record list: %d bytes after the last record", state.ErrMalformed, len(src))
	}
	return vs, nil
}
