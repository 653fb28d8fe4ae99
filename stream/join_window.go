package stream

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/state"
)

// WindowJoin joins two keyed streams per event-time window: for each key
// and window of w ([Tumbling], [Sliding] or [Session]), it emits
// join(key, window, a, b) for every record a of the first input and b of
// the second in the window, when the watermark (the least of both inputs')
// passes the window's end. Session windows are the sessions of both
// inputs' records together: a record of either input extends or merges
// them. A pair in several sliding windows is emitted once per window. A
// record arriving after every window it belongs to fired is late: counted
// in [Metrics].LateRecords, and dropped or sent to the side output of
// [JoinInputs].Late1 or Late2. A key's records of one window are
// one value of checkpointed state, rewritten by each record on the Pebble
// backend: keep windows of one key to thousands of records, not millions.
// name must be unique and stable: the open windows are checkpointed under
// it.
func WindowJoin[K comparable, A, B, OUT any](a KeyedStream[K, A], b KeyedStream[K, B], name string, w Windows,
	in JoinInputs[A, B], join func(key K, w Window, a A, b B) OUT, opts ...KeyedOption) Stream[OUT] {
	checkJoin(a.s.job, "WindowJoin", name, in, true, join == nil)
	pairs := func(key K, w Window, p windowPairs[A, B], out *Output[OUT]) {
		for _, a := range p.first {
			for _, b := range p.second {
				out.Emit(join(key, w, a, b))
			}
		}
	}
	return windowBoth(a, b, "WindowJoin", name, w, in, pairs, 0, opts)
}

// windowBoth keeps both inputs' records of each key per window and calls
// result with them when the window fires (again for late firings within
// lateness): the machinery of WindowJoin and WindowCoGroup.
func windowBoth[K comparable, A, B, OUT any](a KeyedStream[K, A], b KeyedStream[K, B], kind, name string, w Windows,
	in JoinInputs[A, B], result func(key K, w Window, p windowPairs[A, B], out *Output[OUT]), lateness time.Duration, opts []KeyedOption) Stream[OUT] {
	if w.invalid() != "" {
		a.s.job.fail("%s %q: %s", kind, name, w.invalid())
	}
	wd := windowing[K, either[A, B], windowPairs[A, B], OUT]{
		agg: Aggregate[K, either[A, B], windowPairs[A, B], OUT]{
			Add:   windowPairs[A, B].add,
			Merge: windowPairs[A, B].merge,
			Codec: windowPairsCodec[A, B]{listCodec[A]{in.Codec1}, listCodec[B]{in.Codec2}},
		},
		timestamp: func(v either[A, B]) time.Time {
			if v.second {
				return in.Time2(v.b)
			}
			return in.Time1(v.a)
		},
		result:   result,
		late:     func(v either[A, B], out *Output[OUT]) { emitLate(in, v, out) },
		lateness: int64(lateness),
	}
	return connect(a, b, kind, name, wd.setup(w), opts)
}

// windowPairs are the records of both inputs of a key in one window.
type windowPairs[A, B any] struct {
	first  []A
	second []B
}

// add returns p with v added. Appending writes only past the end of the
// stored lists, which no snapshot of p reads: p itself is not modified.
func (p windowPairs[A, B]) add(v either[A, B]) windowPairs[A, B] {
	if v.second {
		p.second = append(p.second, v.b)
	} else {
		p.first = append(p.first, v.a)
	}
	return p
}

// merge returns the records of two sessions in new lists, the earlier
// session's (p) first.
func (p windowPairs[A, B]) merge(q windowPairs[A, B]) windowPairs[A, B] {
	return windowPairs[A, B]{
		first:  append(append(make([]A, 0, len(p.first)+len(q.first)), p.first...), q.first...),
		second: append(append(make([]B, 0, len(p.second)+len(q.second)), p.second...), q.second...),
	}
}

// windowPairsCodec encodes windowPairs as the length of the first list's
// encoding as a uvarint, the first list, then the second.
type windowPairsCodec[A, B any] struct {
	first  listCodec[A]
	second listCodec[B]
}

func (c windowPairsCodec[A, B]) Append(dst []byte, p windowPairs[A, B]) []byte {
	first := c.first.Append(nil, p.first)
	dst = binary.AppendUvarint(dst, uint64(len(first)))
	return c.second.Append(append(dst, first...), p.second)
}

func (c windowPairsCodec[A, B]) Decode(src []byte) (windowPairs[A, B], error) {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)-k) {
		return windowPairs[A, B]{}, fmt.Errorf("%w: window join records: bad length", state.ErrMalformed)
	}
	first, err := c.first.Decode(src[k : k+int(n)])
	if err != nil {
		return windowPairs[A, B]{}, err
	}
	second, err := c.second.Decode(src[k+int(n):])
	if err != nil {
		return windowPairs[A, B]{}, err
	}
	return windowPairs[A, B]{first: first, second: second}, nil
}
