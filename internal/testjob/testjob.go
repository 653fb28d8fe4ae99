// Package testjob starts the small job that the tests of the control API,
// the CLI and the web page operate: generated numbers, rate-limited so
// that it runs until stopped, with event time (see EventTime), counted
// per key in keyed state, into an
// exactly-once file sink, with its control API on a free loopback port and
// a token in a file.
package testjob

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/internal/testwait"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// Name is the job's name; its operators are "numbers" (the source, two
// splits), "count" (keyed by the number modulo 16) and "out" (the sink).
const Name = "cli-test"

// EventTime is the event time of number v: a millisecond apart from
// EventEpoch on, so that the status shows watermarks on that day.
func EventTime(v int64) time.Time { return EventEpoch.Add(time.Duration(v) * time.Millisecond) }

// EventEpoch is the event time of the first number.
var EventEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// Token is the job's control token, in the file Job.TokenFile.
const Token = "cli-test-token"

// Job is a started test job.
type Job struct {
	*stream.Running
	// CheckpointDir is its checkpoint directory, TokenFile the file of
	// its token.
	CheckpointDir, TokenFile string
	// Checkpoints counts the checkpoints and savepoints it completed.
	Checkpoints *testwait.Counter
}

// Start starts the job and waits for its first two checkpoints; the job
// is cancelled when t ends.
func Start(t testing.TB) *Job {
	t.Helper()
	dir := t.TempDir()
	j := &Job{CheckpointDir: filepath.Join(dir, "cp"), TokenFile: filepath.Join(dir, "token"), Checkpoints: new(testwait.Counter)}
	if err := os.WriteFile(j.TokenFile, []byte(Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gen, err := generator.New(generator.Options{Count: 10_000_000, Splits: 2, Rate: 5000}, func(i uint64) int64 { return int64(i) })
	if err != nil {
		t.Fatal(err)
	}
	sk, err := file.NewSink(filepath.Join(dir, "out"), func(dst []byte, v int64) []byte { return append(dst, 'x') }, file.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	job := stream.New(Name)
	numbers := stream.SourceWithEventTime(job, "numbers", gen, stream.EventTime[int64]{Timestamp: EventTime})
	keyed := stream.KeyBy(numbers, func(v int64) int64 { return v % 16 }, state.Int64Codec{})
	counts := stream.Process(keyed, "count", func(ctx *stream.Context[int64]) (stream.ProcessFunc[int64, int64, int64], error) {
		n, err := state.NewValueState(ctx.State(), "n", state.Int64Codec{})
		return stream.ProcessFunc[int64, int64, int64]{Process: func(ctx *stream.Context[int64], v int64, out *stream.Output[int64]) error {
			c, _ := n.Value()
			n.Update(c + 1)
			out.Emit(c + 1)
			return nil
		}}, err
	})
	stream.SinkTo(counts, "out", sk)
	ctx, cancel := context.WithCancel(context.Background())
	j.Running, err = job.Start(ctx, stream.Options{CheckpointDir: j.CheckpointDir, CheckpointInterval: 100 * time.Millisecond,
		Control: stream.ControlOptions{Addr: "127.0.0.1:0", TokenFile: j.TokenFile},
		Probe:   testwait.Checkpoints(j.Checkpoints, nil)})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = j.Wait()
	})
	testwait.For(t, j.Checkpoints.Reached(2), time.Minute, "two checkpoints", nil)
	return j
}
