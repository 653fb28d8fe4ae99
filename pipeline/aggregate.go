package pipeline

import (
	"strconv"
	"time"

	"github.com/exactlyonce/exactly/pipeline/internal/record"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// slot is the accumulator of one aggregate: N values seen; their sum, or
// the minimum or maximum so far, in I (int arguments) or F (float ones).
type slot struct {
	N int64   `json:"n"`
	I int64   `json:"i,omitempty"`
	F float64 `json:"f,omitempty"`
}

// accum is the accumulator of an aggregation: one slot per aggregate.
type accum []slot

// accumCodec encodes accumulators in checkpoints.
type accumCodec = state.JSONCodec[accum]

// add returns acc with the arguments args (one per aggregate, nil for
// count) added; acc is not modified.
func (ap *aggregatePlan) add(acc accum, args []any) accum {
	out := make(accum, len(ap.values))
	copy(out, acc)
	for i, v := range ap.values {
		out[i] = v.addTo(out[i], args[i])
	}
	return out
}

// addTo adds one argument to a slot.
func (v aggValue) addTo(s slot, arg any) slot {
	var iv int64
	var fv float64
	switch x := arg.(type) {
	case int:
		iv, fv = int64(x), float64(x)
	case float64:
		fv = x
	}
	first := s.N == 0
	s.N++
	isInt := v.arg != nil && v.arg.typ == record.Int
	switch v.fn {
	case "sum", "avg":
		if isInt && v.fn == "sum" {
			s.I += iv
		} else {
			s.F += fv
		}
	case "min":
		if isInt && (first || iv < s.I) {
			s.I = iv
		} else if !isInt && (first || fv < s.F) {
			s.F = fv
		}
	case "max":
		if isInt && (first || iv > s.I) {
			s.I = iv
		} else if !isInt && (first || fv > s.F) {
			s.F = fv
		}
	}
	return s
}

// merge returns the accumulator of two sessions' union.
func (ap *aggregatePlan) merge(a, b accum) accum {
	out := make(accum, len(ap.values))
	for i, v := range ap.values {
		x, y := a[i], b[i]
		switch {
		case x.N == 0:
			out[i] = y
			continue
		case y.N == 0:
			out[i] = x
			continue
		}
		s := slot{N: x.N + y.N, I: x.I + y.I, F: x.F + y.F}
		switch v.fn {
		case "min":
			s.I, s.F = min(x.I, y.I), min(x.F, y.F)
		case "max":
			s.I, s.F = max(x.I, y.I), max(x.F, y.F)
		}
		out[i] = s
	}
	return out
}

// result returns the output record of key and acc; with a window, its
// start and end too.
func (ap *aggregatePlan) result(key string, w *stream.Window, acc accum) record.Record {
	rec := make(record.Record, len(ap.output))
	rec["key"] = ap.typedKey(key)
	if w != nil {
		rec["window_start"], rec["window_end"] = w.Start.UTC(), w.End.UTC()
	}
	for i, v := range ap.values {
		s := acc[i]
		switch {
		case v.fn == "count":
			rec[v.name] = int(s.N)
		case v.fn == "avg":
			rec[v.name] = s.F / float64(max(s.N, 1))
		case v.typ == record.Int:
			rec[v.name] = int(s.I)
		default:
			rec[v.name] = s.F
		}
	}
	return rec
}

// keyString returns the text of a key value, which partitions records.
func keyString(v any) string { return record.Text(v) }

// typedKey returns the key value of its text, as keyString made it.
func (ap *aggregatePlan) typedKey(key string) any {
	switch ap.keyType {
	case record.Int:
		i, _ := strconv.Atoi(key) // keyString wrote it
		return i
	case record.Bool:
		return key == "true"
	}
	return key
}

// keyed adds the key_by and aggregate of ap to s, whose records carry
// their key and arguments (see [builder.prepareAggregate]). A windowed
// aggregate sends its late records to late, when not nil.
func (b *builder) keyed(s stream.Stream[item], ap *aggregatePlan, late *stream.OutputTag[item]) stream.Stream[item] {
	ks := stream.KeyBy(s, func(it item) string { return it.key }, state.StringCodec{})
	if ap.window == nil {
		return stream.Process(ks, ap.name, func(ctx *stream.Context[string]) (stream.ProcessFunc[string, item, item], error) {
			acc, err := state.NewValueState(ctx.State(), "accumulator", accumCodec{})
			return stream.ProcessFunc[string, item, item]{
				Process: func(ctx *stream.Context[string], it item, out *stream.Output[item]) error {
					a, _ := acc.Value()
					a = ap.add(a, it.args)
					acc.Update(a)
					out.Emit(item{rec: ap.result(ctx.Key(), nil, a), ts: it.ts})
					return nil
				},
			}, err
		})
	}
	w := ap.window
	opts := []stream.WindowOption{stream.AllowedLateness(w.AllowedLateness)}
	if late != nil {
		opts = append(opts, stream.LateRecords(*late))
	}
	var windows stream.Windows
	switch w.Kind {
	case "tumbling":
		windows = stream.Tumbling(w.Size)
	case "sliding":
		windows = stream.Sliding(w.Size, w.Slide)
	default:
		windows = stream.Session(w.Gap)
	}
	return stream.WindowAggregate(ks, ap.name, windows, func(it item) time.Time { return time.Unix(0, it.ts) },
		stream.Aggregate[string, item, accum, item]{
			Add:   func(a accum, it item) accum { return ap.add(a, it.args) },
			Merge: ap.merge,
			Result: func(key string, win stream.Window, a accum) item {
				return item{rec: ap.result(key, &win, a), ts: win.End.UnixNano() - 1}
			},
			Codec: accumCodec{},
		}, opts...)
}
