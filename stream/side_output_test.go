package stream_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
	"go.uber.org/goleak"
)

// TestSideOutputs runs a process function that emits even values to its
// main output and odd ones, as strings, to a side output read by two
// sinks, and a side output nothing reads: every sink gets its records once.
func TestSideOutputs(t *testing.T) {
	defer goleak.VerifyNone(t)
	odd := stream.NewOutputTag[string]("odd")
	unread := stream.NewOutputTag[int]("unread")
	j := stream.New("sides")
	nums := stream.Source(j, "nums", counting{n: 3000, splits: 3}, stream.Parallelism(2))
	keyed := stream.KeyBy(nums, func(v int) int { return v % 7 }, state.IntCodec{})
	evens := stream.Process(keyed, "split", func(*stream.Context[int]) (stream.ProcessFunc[int, int, int], error) {
		return stream.ProcessFunc[int, int, int]{Process: func(_ *stream.Context[int], v int, out *stream.Output[int]) error {
			if v%2 == 0 {
				out.Emit(v)
				return nil
			}
			stream.EmitTo(out, odd, strings.Repeat("x", v%5)+"|")
			stream.EmitTo(out, unread, v)
			return nil
		}}, nil
	}, stream.Parallelism(3))
	mainOut, oddOut, oddAgain := newMemSink[int](), newMemSink[string](), newMemSink[string]()
	stream.SinkTo(evens, "evens", mainOut)
	stream.SinkTo(stream.SideOutput(evens, odd), "odds", oddOut)
	stream.SinkTo(stream.SideOutput(evens, odd).Rebalance(), "odds-again", oddAgain, stream.Parallelism(1))
	if err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 10 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	var wantEvens []int
	var wantOdds []string
	for v := range 3000 {
		if v%2 == 0 {
			wantEvens = append(wantEvens, v)
		} else {
			wantOdds = append(wantOdds, strings.Repeat("x", v%5)+"|")
		}
	}
	slices.Sort(wantOdds)
	gotEvens := mainOut.Visible()
	slices.Sort(gotEvens)
	if !slices.Equal(gotEvens, wantEvens) {
		t.Errorf("main output: %d records, want %d", len(gotEvens), len(wantEvens))
	}
	for name, s := range map[string]*memSink[string]{"odds": oddOut, "odds-again": oddAgain} {
		got := s.Visible()
		slices.Sort(got)
		if !slices.Equal(got, wantOdds) {
			t.Errorf("side output sink %s: %d records, want %d", name, len(got), len(wantOdds))
		}
	}
}

// TestSideOutputErrors: misuses of side outputs are reported when the job
// starts, naming the operator and the fix.
func TestSideOutputErrors(t *testing.T) {
	process := func(ks stream.KeyedStream[int, int]) stream.Stream[int] {
		return stream.Process(ks, "p", func(*stream.Context[int]) (stream.ProcessFunc[int, int, int], error) {
			return stream.ProcessFunc[int, int, int]{Process: func(*stream.Context[int], int, *stream.Output[int]) error { return nil }}, nil
		})
	}
	for _, c := range []struct {
		name  string
		build func(nums stream.Stream[int], ks stream.KeyedStream[int, int]) stream.Stream[int]
		want  string
	}{
		{"side output of a map", func(nums stream.Stream[int], _ stream.KeyedStream[int, int]) stream.Stream[int] {
			return stream.SideOutput(stream.Map(nums, func(v int) int { return v }), stream.NewOutputTag[int]("x"))
		}, `only the main output of Process, WindowAggregate, a join or AsyncMap has side outputs`},
		{"side output of a side output", func(_ stream.Stream[int], ks stream.KeyedStream[int, int]) stream.Stream[int] {
			return stream.SideOutput(stream.SideOutput(process(ks), stream.NewOutputTag[int]("a")), stream.NewOutputTag[int]("b"))
		}, `SideOutput "b" of "p": only the main output`},
		{"tag without a name", func(_ stream.Stream[int], ks stream.KeyedStream[int, int]) stream.Stream[int] {
			return stream.SideOutput(process(ks), stream.OutputTag[int]{})
		}, `the output tag has no name: make it with NewOutputTag(name)`},
		{"one name, two types", func(_ stream.Stream[int], ks stream.KeyedStream[int, int]) stream.Stream[int] {
			p := process(ks)
			stream.SideOutput(p, stream.NewOutputTag[string]("x"))
			return stream.SideOutput(p, stream.NewOutputTag[int]("x"))
		}, `SideOutput "x" of "p": taken as string records and as int records`},
	} {
		t.Run(c.name, func(t *testing.T) {
			j := stream.New("bad")
			nums := stream.Source(j, "nums", counting{n: 1, splits: 1})
			ks := stream.KeyBy(nums, func(v int) int { return v }, state.IntCodec{})
			stream.SinkTo(c.build(nums, ks), "out", newMemSink[int]())
			err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir()})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Run = %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// TestEmitToMistypedTag: a tag with the name of a side output of another
// type fails the job with an error naming both types.
func TestEmitToMistypedTag(t *testing.T) {
	defer goleak.VerifyNone(t)
	j := stream.New("mistyped")
	nums := stream.Source(j, "nums", counting{n: 10, splits: 1})
	ks := stream.KeyBy(nums, func(v int) int { return v }, state.IntCodec{})
	p := stream.Process(ks, "p", func(*stream.Context[int]) (stream.ProcessFunc[int, int, int], error) {
		return stream.ProcessFunc[int, int, int]{Process: func(_ *stream.Context[int], v int, out *stream.Output[int]) error {
			stream.EmitTo(out, stream.NewOutputTag[int]("x"), v)
			return nil
		}}, nil
	})
	stream.SinkTo(stream.SideOutput(p, stream.NewOutputTag[string]("x")), "out", newMemSink[string]())
	err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir(), Restart: stream.RestartStrategy{MaxAttempts: -1}})
	if want := `side output "x" carries string records, not int`; err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Run = %v, want an error containing %q", err, want)
	}
}
