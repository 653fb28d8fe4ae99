package stream_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/source"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// click is the record of the examples: a user's click at an event time.
type click struct {
	User string
	At   time.Time
}

// at returns 12:mm of the examples' day.
func at(mm int) time.Time { return time.Date(2026, 1, 2, 12, mm, 0, 0, time.UTC) }

// clicks is a source of fixed clicks from one split, one per read: with
// the watermark sent after each ([stream.Options].WatermarkInterval of a
// nanosecond), an example's output is the same every run.
type clicks = fixed[click]

// fixed is a source of the given records from one split, one per read.
type fixed[T any] []T

func (f fixed[T]) Splits(context.Context) ([]string, error) { return []string{"0"}, nil }

func (f fixed[T]) Open(_ context.Context, _ string, pos []byte) (source.Reader[T], error) {
	next, _ := binary.Uvarint(pos)
	return &fixedReader[T]{recs: f, next: int(next)}, nil
}

type fixedReader[T any] struct {
	recs fixed[T]
	next int
}

func (r *fixedReader[T]) Read(_ context.Context, buf []T) (int, error) {
	if r.next == len(r.recs) {
		return 0, io.EOF
	}
	buf[0] = r.recs[r.next]
	r.next++
	return 1, nil
}

func (r *fixedReader[T]) Position() []byte { return binary.AppendUvarint(nil, uint64(r.next)) }
func (r *fixedReader[T]) Close() error     { return nil }

// fileSink returns an exactly-once file sink writing lines to dir/name.
func fileSink[T any](dir, name string, line func(T) string) *file.Sink[T] {
	s, err := file.NewSink(filepath.Join(dir, name), func(dst []byte, v T) []byte { return append(dst, line(v)...) }, file.SinkOptions{})
	if err != nil {
		log.Fatal(err)
	}
	return s
}

// printCommitted prints the lines a file sink committed, sorted.
func printCommitted(dir, name string) {
	lines, err := committedLines(filepath.Join(dir, name))
	if err != nil {
		log.Fatal(err)
	}
	slices.Sort(lines)
	fmt.Printf("%s:\n  %s\n", name, strings.Join(lines, "\n  "))
}

// perUser counts a user's clicks per window.
var perUser = stream.Aggregate[string, click, int, string]{
	Add:   func(n int, _ click) int { return n + 1 },
	Merge: func(a, b int) int { return a + b },
	Result: func(user string, w stream.Window, n int) string {
		return fmt.Sprintf("%s %s-%s firing %d: %d clicks", user, w.Start.Format("15:04"), w.End.Format("15:04"), w.Firing, n)
	},
	Codec: state.IntCodec{},
}

// runExample runs j with its checkpoints in dir, the watermark sent after
// every record.
func runExample(j *stream.Job, dir string) {
	err := j.Run(context.Background(), stream.Options{CheckpointDir: filepath.Join(dir, "checkpoints"), WatermarkInterval: time.Nanosecond})
	if err != nil {
		log.Fatal(err)
	}
}

// Session windows group a user's clicks less than 10 minutes apart; the
// click at 12:14, out of order, bridges the two sessions before it into
// one. Clicks exactly 10 minutes apart would be in two sessions.
func ExampleSession() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	j := stream.New("sessions")
	in := stream.SourceWithEventTime(j, "clicks", clicks{
		{"ann", at(0)}, {"ann", at(5)}, {"bob", at(7)}, {"ann", at(20)}, {"ann", at(14)}, {"bob", at(40)},
	}, stream.EventTime[click]{Timestamp: func(c click) time.Time { return c.At }, MaxOutOfOrderness: 10 * time.Minute})
	byUser := stream.KeyBy(in, func(c click) string { return c.User }, state.StringCodec{})
	sessions := stream.WindowAggregate(byUser, "sessions", stream.Session(10*time.Minute), func(c click) time.Time { return c.At }, perUser)
	stream.SinkTo(sessions, "out", fileSink(dir, "out", func(s string) string { return s }))
	runExample(j, dir)
	printCommitted(dir, "out")
	// Output:
	// out:
	//   ann 12:00-12:30 firing 0: 4 clicks
	//   bob 12:07-12:17 firing 0: 1 clicks
	//   bob 12:40-12:50 firing 0: 1 clicks
}

// With an allowed lateness of 10 minutes, a click behind the watermark
// but less than 10 minutes after its window's end updates the window: the
// window fires again, its Firing counting the results before. A click
// later than that goes to the side output of late records.
func ExampleAllowedLateness() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	j := stream.New("lateness")
	in := stream.SourceWithEventTime(j, "clicks", clicks{
		{"ann", at(1)}, {"ann", at(2)}, {"ann", at(16)}, // the watermark passes 12:15: 12:00-12:15 fires
		{"ann", at(14)}, // late by a minute: 12:00-12:15 fires again
		{"ann", at(40)}, // the watermark passes 12:30 and 12:00-12:15 expires
		{"ann", at(3)},  // too late: a late record
	}, stream.EventTime[click]{Timestamp: func(c click) time.Time { return c.At }})
	byUser := stream.KeyBy(in, func(c click) string { return c.User }, state.StringCodec{})
	late := stream.NewOutputTag[click]("late-clicks")
	counts := stream.WindowAggregate(byUser, "counts", stream.Tumbling(15*time.Minute), func(c click) time.Time { return c.At }, perUser,
		stream.AllowedLateness(10*time.Minute), stream.LateRecords(late))
	stream.SinkTo(counts, "out", fileSink(dir, "out", func(s string) string { return s }))
	stream.SinkTo(stream.SideOutput(counts, late), "late", fileSink(dir, "late", func(c click) string {
		return c.User + " " + c.At.Format("15:04")
	}))
	runExample(j, dir)
	printCommitted(dir, "out")
	printCommitted(dir, "late")
	// Output:
	// out:
	//   ann 12:00-12:15 firing 0: 2 clicks
	//   ann 12:00-12:15 firing 1: 3 clicks
	//   ann 12:15-12:30 firing 0: 1 clicks
	//   ann 12:30-12:45 firing 0: 1 clicks
	// late:
	//   ann 12:03
}

// A process function sends the records it rejects to a side output,
// a dead-letter stream with its own exactly-once sink.
func ExampleSideOutput() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	j := stream.New("dead-letters")
	in := stream.Source(j, "clicks", clicks{{"ann", at(1)}, {"", at(2)}, {"bob", at(3)}})
	byUser := stream.KeyBy(in, func(c click) string { return c.User }, state.StringCodec{})
	invalid := stream.NewOutputTag[click]("invalid")
	valid := stream.Process(byUser, "validate", func(*stream.Context[string]) (stream.ProcessFunc[string, click, string], error) {
		return stream.ProcessFunc[string, click, string]{
			Process: func(_ *stream.Context[string], c click, out *stream.Output[string]) error {
				if c.User == "" {
					stream.EmitTo(out, invalid, c)
					return nil
				}
				out.Emit(c.User)
				return nil
			},
		}, nil
	})
	stream.SinkTo(valid, "users", fileSink(dir, "users", func(s string) string { return s }))
	stream.SinkTo(stream.SideOutput(valid, invalid), "dead-letters", fileSink(dir, "dead-letters", func(c click) string {
		return "no user at " + c.At.Format("15:04")
	}))
	runExample(j, dir)
	printCommitted(dir, "users")
	printCommitted(dir, "dead-letters")
	// Output:
	// users:
	//   ann
	//   bob
	// dead-letters:
	//   no user at 12:02
}

// A tumbling window counts each user's clicks per quarter of an hour.
func ExampleWindowAggregate() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	j := stream.New("quarters")
	in := stream.SourceWithEventTime(j, "clicks", clicks{{"ann", at(1)}, {"bob", at(2)}, {"ann", at(14)}, {"ann", at(15)}},
		stream.EventTime[click]{Timestamp: func(c click) time.Time { return c.At }})
	byUser := stream.KeyBy(in, func(c click) string { return c.User }, state.StringCodec{})
	counts := stream.WindowAggregate(byUser, "quarters", stream.Tumbling(15*time.Minute), func(c click) time.Time { return c.At }, perUser)
	stream.SinkTo(counts, "out", fileSink(dir, "out", func(s string) string { return s }))
	runExample(j, dir)
	printCommitted(dir, "out")
	// Output:
	// out:
	//   ann 12:00-12:15 firing 0: 2 clicks
	//   ann 12:15-12:30 firing 0: 1 clicks
	//   bob 12:00-12:15 firing 0: 1 clicks
}

// A process function keeps a running count per user in keyed state; after
// a crash the count resumes from the checkpoint, so each click counts once.
func ExampleProcess() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	j := stream.New("running-counts")
	in := stream.Source(j, "clicks", clicks{{"ann", at(1)}, {"bob", at(2)}, {"ann", at(3)}})
	byUser := stream.KeyBy(in, func(c click) string { return c.User }, state.StringCodec{})
	counts := stream.Process(byUser, "counts", func(ctx *stream.Context[string]) (stream.ProcessFunc[string, click, string], error) {
		count, err := state.NewValueState(ctx.State(), "count", state.IntCodec{})
		if err != nil {
			return stream.ProcessFunc[string, click, string]{}, err
		}
		return stream.ProcessFunc[string, click, string]{
			Process: func(ctx *stream.Context[string], c click, out *stream.Output[string]) error {
				n, _ := count.Value()
				count.Update(n + 1)
				out.Emit(fmt.Sprintf("%s %d", ctx.Key(), n+1))
				return nil
			},
		}, nil
	})
	stream.SinkTo(counts, "out", fileSink(dir, "out", func(s string) string { return s }))
	runExample(j, dir)
	printCommitted(dir, "out")
	// Output:
	// out:
	//   ann 1
	//   ann 2
	//   bob 1
}
