package stream_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/source"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// gated is a source of one split reading the event times (ms) ts, one per
// Read; before the i-th (and before the end, i = len(ts)) it waits for
// gates[i] to be closed, when set.
type gated struct {
	ts    []int64
	gates map[int]<-chan struct{}
}

func (g gated) Splits(context.Context) ([]string, error) { return []string{"0"}, nil }

func (g gated) Open(_ context.Context, _ string, pos []byte) (source.Reader[int64], error) {
	next, _ := binary.Uvarint(pos)
	return &gatedReader{g: g, next: int(next)}, nil
}

type gatedReader struct {
	g    gated
	next int
}

func (r *gatedReader) Read(ctx context.Context, buf []int64) (int, error) {
	if gate := r.g.gates[r.next]; gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	if r.next == len(r.g.ts) {
		return 0, io.EOF
	}
	buf[0] = r.g.ts[r.next]
	r.next++
	return 1, nil
}

func (r *gatedReader) Position() []byte { return binary.AppendUvarint(nil, uint64(r.next)) }
func (r *gatedReader) Close() error     { return nil }

func msTime(ms int64) time.Time { return time.UnixMilli(ms) }

// TestCoProcessWatermarkIsTheLeastOfBoth checks that a watermark of one
// input alone fires no event-time timer: the second input's record at
// 500 ms registers a timer at 600 ms and its input then waits; the first
// input reads 1000 ms, then 1001 ms, so its watermark of 1000 ms reached
// the operator before the record at 1001 ms (they travel in order on one
// channel). The timer must not have fired then; it fires once the second
// input ends.
func TestCoProcessWatermarkIsTheLeastOfBoth(t *testing.T) {
	bSeen, release := make(chan struct{}), make(chan struct{})
	j := stream.New("co-watermark")
	et := stream.EventTime[int64]{Timestamp: msTime}
	a := stream.SourceWithEventTime(j, "a", gated{ts: []int64{1000, 1001}, gates: map[int]<-chan struct{}{0: bSeen}}, et)
	b := stream.SourceWithEventTime(j, "b", gated{ts: []int64{500}, gates: map[int]<-chan struct{}{1: release}}, et)
	zero := func(int64) int64 { return 0 }
	var checked, fired bool
	var failure error
	out := stream.CoProcess(stream.KeyBy(a, zero, state.Int64Codec{}), stream.KeyBy(b, zero, state.Int64Codec{}), "co",
		func(*stream.Context[int64]) (stream.CoProcessFunc[int64, int64, int64, string], error) {
			return stream.CoProcessFunc[int64, int64, int64, string]{
				Process1: func(ctx *stream.Context[int64], v int64, _ *stream.Output[string]) error {
					if v == 1001 {
						if fired || !ctx.Watermark().Before(msTime(600)) {
							failure = errors.New("the first input's watermark alone advanced the operator's: " + ctx.Watermark().String())
						}
						checked = true
						close(release)
					}
					return nil
				},
				Process2: func(ctx *stream.Context[int64], v int64, _ *stream.Output[string]) error {
					ctx.RegisterEventTimer(msTime(600))
					close(bSeen)
					return nil
				},
				OnEventTimer: func(ctx *stream.Context[int64], when time.Time, out *stream.Output[string]) error {
					fired = true
					out.Emit("fired at " + when.UTC().Format("05.000"))
					return nil
				},
			}, nil
		})
	snk := newMemSink[string]()
	stream.SinkTo(out, "out", snk)
	if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), WatermarkInterval: time.Nanosecond}); err != nil {
		t.Fatal(err)
	}
	if failure != nil {
		t.Fatal(failure)
	}
	if got := snk.Visible(); !checked || !slices.Equal(got, []string{"fired at 00.600"}) {
		t.Errorf("checked %v, output %q: want the timer fired once, after the check", checked, got)
	}
}

// TestCoProcessSharesStateAndSideOutputs keys two streams alike: both
// inputs add to one keyed state, read by an event-time timer when both
// ended, and the second input's odd values go to a side output.
func TestCoProcessSharesStateAndSideOutputs(t *testing.T) {
	j := stream.New("co-state")
	et := stream.EventTime[int64]{Timestamp: msTime}
	vals := make([]int64, 0, 100)
	for i := range int64(100) {
		vals = append(vals, i)
	}
	a := stream.SourceWithEventTime(j, "a", gated{ts: vals}, et)
	b := stream.SourceWithEventTime(j, "b", gated{ts: vals[:30]}, et)
	mod4 := func(v int64) int64 { return v % 4 }
	odd := stream.NewOutputTag[int64]("odd")
	type sums struct{ A, B int64 }
	out := stream.CoProcess(stream.KeyBy(a, mod4, state.Int64Codec{}), stream.KeyBy(b, mod4, state.Int64Codec{}), "co",
		func(ctx *stream.Context[int64]) (stream.CoProcessFunc[int64, int64, int64, string], error) {
			total, err := state.NewValueState(ctx.State(), "sums", state.JSONCodec[sums]{})
			if err != nil {
				return stream.CoProcessFunc[int64, int64, int64, string]{}, err
			}
			return stream.CoProcessFunc[int64, int64, int64, string]{
				Process1: func(ctx *stream.Context[int64], v int64, _ *stream.Output[string]) error {
					s, _ := total.Value()
					s.A += v
					total.Update(s)
					ctx.RegisterEventTimer(msTime(1000))
					return nil
				},
				Process2: func(ctx *stream.Context[int64], v int64, out *stream.Output[string]) error {
					s, _ := total.Value()
					s.B += v
					total.Update(s)
					if v%2 == 1 {
						stream.EmitTo(out, odd, v)
					}
					return nil
				},
				OnEventTimer: func(ctx *stream.Context[int64], _ time.Time, out *stream.Output[string]) error {
					s, _ := total.Value()
					out.Emit(strings.Join([]string{itoa(ctx.Key()), itoa(s.A), itoa(s.B)}, ","))
					return nil
				},
			}, nil
		}, stream.Parallelism(2))
	main, side := newMemSink[string](), newMemSink[int64]()
	stream.SinkTo(out, "out", main)
	stream.SinkTo(stream.SideOutput(out, odd), "odd", side)
	if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 5 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for k := range int64(4) {
		var sa, sb int64
		for v := k; v < 100; v += 4 {
			sa += v
			if v < 30 {
				sb += v
			}
		}
		want = append(want, strings.Join([]string{itoa(k), itoa(sa), itoa(sb)}, ","))
	}
	got := main.Visible()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("sums %q, want %q", got, want)
	}
	gotOdd := side.Visible()
	slices.Sort(gotOdd)
	var wantOdd []int64
	for v := int64(1); v < 30; v += 2 {
		wantOdd = append(wantOdd, v)
	}
	if !slices.Equal(gotOdd, wantOdd) {
		t.Errorf("side output %v, want %v", gotOdd, wantOdd)
	}
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// TestCoProcessMisuse checks the errors of a CoProcess built or set up
// wrong: each names the operator and the fix.
func TestCoProcessMisuse(t *testing.T) {
	id := func(v int64) int64 { return v }
	for _, c := range []struct {
		name  string
		build func(j *stream.Job) stream.Stream[int64]
		want  string
	}{
		{"nil setup", func(j *stream.Job) stream.Stream[int64] {
			a := stream.KeyBy(stream.Source(j, "a", gated{}), id, state.Int64Codec{})
			return stream.CoProcess[int64, int64, int64, int64](a, a, "co", nil)
		}, `CoProcess "co": the setup function is nil`},
		{"codecs differ", func(j *stream.Job) stream.Stream[int64] {
			a := stream.KeyBy(stream.Source(j, "a", gated{}), id, state.Int64Codec{})
			b := stream.KeyBy(stream.Source(j, "b", gated{}), id, state.JSONCodec[int64]{})
			return stream.CoProcess(a, b, "co", func(*stream.Context[int64]) (stream.CoProcessFunc[int64, int64, int64, int64], error) {
				return stream.CoProcessFunc[int64, int64, int64, int64]{}, nil
			})
		}, `different codecs (state.Int64Codec and state.JSONCodec[int64]): key both with the same codec`},
		{"no Process2", func(j *stream.Job) stream.Stream[int64] {
			a := stream.KeyBy(stream.Source(j, "a", gated{}), id, state.Int64Codec{})
			return stream.CoProcess(a, a, "co", func(*stream.Context[int64]) (stream.CoProcessFunc[int64, int64, int64, int64], error) {
				return stream.CoProcessFunc[int64, int64, int64, int64]{
					Process1: func(*stream.Context[int64], int64, *stream.Output[int64]) error { return nil },
				}, nil
			})
		}, `without Process1 or Process2: set both`},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := stream.New("co-misuse")
			stream.SinkTo(c.build(j), "out", newMemSink[int64]())
			err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), Restart: stream.RestartStrategy{MaxAttempts: -1}})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}
