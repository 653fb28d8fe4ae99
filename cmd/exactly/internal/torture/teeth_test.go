package torture

import (
	"context"
	"hash/crc32"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/internal/crashtest/crashtesting"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/stream"
)

// The teeth tests run the torture job's keyed totals, or its event-time
// windows, on generated events into a file sink that is deliberately
// broken, kill the job process once right after the sink prepared
// checkpoint 2 (so that checkpoint never completes), restart it, and check
// that the checker finds exactly the anomaly the breakage causes.

var teethWorkload = Workload{Events: 3000, Keys: 20, Seed: 7}

// teethWindowWorkload feeds the windowed branch: 12,000 events at
// 12,000/s, so that about 1.2 s of event time (two windows or more per
// key) is emitted between two checkpoints and lands in the transaction of
// checkpoint 2.
var teethWindowWorkload = Workload{Events: 12_000, Keys: 20, Seed: 7}

// Breakages of brokenSink.
const (
	correct         = "correct"           // a correct sink: the control
	commitAtPrepare = "commit-at-prepare" // makes a transaction visible at Prepare
	dropOnRestart   = "drop-on-restart"   // loses the first batch written after a restart
)

// brokenSink wraps the file sink with a breakage. In the first process
// (no marker file yet) it SIGKILLs its process after preparing checkpoint 2.
type brokenSink[T any] struct {
	*file.Sink[T]
	mode   string
	marker string // exists once a process has been killed
}

func (b brokenSink[T]) NewWriter(ctx context.Context, info sink.WriterInfo) (sink.Writer[T], error) {
	w, err := b.Sink.NewWriter(ctx, info)
	if err != nil {
		return nil, err
	}
	c, err := b.NewCommitter(ctx, sink.CommitterInfo{Job: info.Job, Sink: info.Sink, Owner: info.Owner})
	if err != nil {
		return nil, err
	}
	_, statErr := os.Stat(b.marker)
	return &brokenWriter[T]{Writer: w, c: c, b: b, subtask: info.Subtask, restarted: statErr == nil}, nil
}

type brokenWriter[T any] struct {
	sink.Writer[T]
	c         sink.Committer
	b         brokenSink[T]
	subtask   int
	restarted bool // a process was killed before this writer opened
	dropped   bool
}

func (w *brokenWriter[T]) Write(ctx context.Context, batch []T) error {
	if w.b.mode == dropOnRestart && w.restarted && !w.dropped {
		w.dropped = true
		return nil
	}
	return w.Writer.Write(ctx, batch)
}

func (w *brokenWriter[T]) Prepare(ctx context.Context, id checkpoint.ID) ([]byte, error) {
	data, err := w.Writer.Prepare(ctx, id)
	if err != nil || data == nil {
		return data, err
	}
	if w.b.mode == commitAtPrepare {
		if err := w.c.Commit(ctx, sink.Committable{Checkpoint: id, Subtask: w.subtask, Data: data}); err != nil {
			return nil, err
		}
	}
	if id == 2 && !w.restarted {
		if err := os.WriteFile(w.b.marker, nil, 0o644); err != nil {
			return nil, err
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	return data, nil
}

// Branches of the job the teeth tests run (TEETH_BRANCH).
const (
	branchTotals  = "totals"
	branchWindows = "windows"
)

// runTeethChild runs the job once, in a crashtest child.
func runTeethChild(t *testing.T) {
	dir, mode, branch := os.Getenv("TEETH_DIR"), os.Getenv("TEETH_MODE"), os.Getenv("TEETH_BRANCH")
	w, rate, opts := teethWorkload, 6000.0, stream.Options{CheckpointDir: filepath.Join(dir, "ckpt"), CheckpointInterval: 100 * time.Millisecond}
	if branch == branchWindows {
		w, rate, opts.WatermarkInterval = teethWindowWorkload, 12_000, 5*time.Millisecond
	}
	evs := w.Generate()
	src, err := generator.New(generator.Options{Count: uint64(len(evs)), Splits: 1, Rate: rate}, func(i uint64) Event {
		return evs[i]
	})
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New("teeth")
	files, marker := filepath.Join(dir, "files"), filepath.Join(dir, "killed")
	if branch == branchWindows {
		events := stream.SourceWithEventTime(j, "events", src, stream.EventTime[Event]{Timestamp: Event.Time})
		fs, err := file.NewSink(files, appendWindow, file.SinkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stream.SinkTo[WindowOut](Windows(events, 1), "files", brokenSink[WindowOut]{Sink: fs, mode: mode, marker: marker})
	} else {
		fs, err := file.NewSink(files, appendOut, file.SinkOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stream.SinkTo[Out](Totals(stream.Source(j, "events", src), 1), "files", brokenSink[Out]{Sink: fs, mode: mode, marker: marker})
	}
	if err := j.Run(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
}

var teethEvents = teethWorkload.Generate()

// TestCheckerHasTeeth shows that the checker catches a sink that commits
// at Prepare (duplicates after the replay) and one that drops a batch
// after a restart (missing events, or missing windows), and passes a
// correct sink under the same kill, for the keyed totals (CheckFiles) and
// the event-time windows (CheckWindows).
func TestCheckerHasTeeth(t *testing.T) {
	for _, branch := range []string{branchTotals, branchWindows} {
		for _, mode := range []string{correct, commitAtPrepare, dropOnRestart} {
			t.Run(branch+"/"+mode, func(t *testing.T) {
				if crashtest.IsChild() {
					runTeethChild(t)
					return
				}
				dir := t.TempDir()
				rep := crashtesting.Run(t, crashtest.Options{Kills: 1, Env: []string{"TEETH_DIR=" + dir, "TEETH_MODE=" + mode, "TEETH_BRANCH=" + branch}})
				if rep.Kills != 1 {
					t.Fatalf("the job was killed %d times, want once", rep.Kills)
				}
				files := filepath.Join(dir, "files")
				var res SinkResult
				var err error
				if branch == branchWindows {
					res, err = checkFiles("files", files, parseWindow, NewExpected(teethWindowWorkload).CheckWindows)
				} else {
					res, err = CheckFiles(NewExpected(teethWorkload), "files", files)
				}
				if err != nil {
					t.Fatal(err)
				}
				t.Log(res)
				switch mode {
				case correct:
					if res.Anomalies() != 0 {
						t.Errorf("correct sink: %d anomalies: %v", res.Anomalies(), res.Examples)
					}
				case commitAtPrepare:
					if res.Duplicates == 0 || res.Missing != 0 {
						t.Errorf("commit at Prepare: duplicates %d, missing %d; want duplicates and nothing missing", res.Duplicates, res.Missing)
					}
				case dropOnRestart:
					if res.Missing == 0 || res.Duplicates != 0 {
						t.Errorf("drop on restart: missing %d, duplicates %d; want missing %s and no duplicates", res.Missing, res.Duplicates, res.unit())
					}
				}
			})
		}
	}
}

// TestWindowCheckerHasTeeth breaks the windowed output of a correct run by
// hand, one way per case, and checks that CheckWindows (after the output
// went through its text encoding and parseStreams) counts exactly the
// anomaly made, and none in the intact output.
func TestWindowCheckerHasTeeth(t *testing.T) {
	x := NewExpected(teethWorkload)
	// The expected windows hold every event once, in windows of 500 ms.
	var count, sum, amounts int64
	for _, w := range x.windows {
		count, sum = count+w.Count, sum+w.Sum
		if w.Start%windowSize.Milliseconds() != 0 || w.Count == 0 {
			t.Fatalf("expected window %+v: not aligned to %v or empty", w, windowSize)
		}
	}
	for _, e := range teethEvents {
		amounts += e.Amount
	}
	if count != int64(teethWorkload.Events) || sum != amounts || len(x.windows) < 100 {
		t.Fatalf("expected windows: %d windows, %d events, sum %d; want at least 100 windows, %d events, sum %d",
			len(x.windows), count, sum, teethWorkload.Events, amounts)
	}

	// A correct output, as the Kafka sink writes it: each key's windows in
	// start order in one of three partitions.
	intact := func() [][]WindowOut {
		s := make([][]WindowOut, outputPartitions)
		for _, w := range x.windows {
			p := crc32.ChecksumIEEE([]byte(w.Key)) % outputPartitions
			s[p] = append(s[p], w)
		}
		return s
	}
	// next returns the index of the next window of s[0]'s key in s.
	next := func(s []WindowOut) int {
		for i := 1; i < len(s); i++ {
			if s[i].Key == s[0].Key {
				return i
			}
		}
		t.Fatalf("key %s has one window", s[0].Key)
		return 0
	}
	for _, c := range []struct {
		name  string
		brk   func(s [][]WindowOut) [][]WindowOut
		extra string // a line appended to the first stream
		want  SinkResult
	}{
		{name: "intact", brk: func(s [][]WindowOut) [][]WindowOut { return s }},
		{name: "window dropped", brk: func(s [][]WindowOut) [][]WindowOut { s[0] = s[0][1:]; return s },
			want: SinkResult{Missing: 1}},
		{name: "window doubled in its partition", brk: func(s [][]WindowOut) [][]WindowOut { s[0] = append(s[0], s[0][0]); return s },
			want: SinkResult{Duplicates: 1}},
		{name: "window doubled in another partition", brk: func(s [][]WindowOut) [][]WindowOut { s[1] = append(s[1], s[0][0]); return s },
			want: SinkResult{Duplicates: 1}},
		{name: "count too high", brk: func(s [][]WindowOut) [][]WindowOut { s[0][0].Count++; return s },
			want: SinkResult{WrongTotals: 1}},
		{name: "count and sum too low", brk: func(s [][]WindowOut) [][]WindowOut { s[0][0].Count--; s[0][0].Sum--; return s },
			want: SinkResult{WrongTotals: 1}},
		{name: "sum off by one, count right", brk: func(s [][]WindowOut) [][]WindowOut { s[0][0].Sum++; return s },
			want: SinkResult{WrongTotals: 1}},
		{name: "window shifted", brk: func(s [][]WindowOut) [][]WindowOut { s[0][0].Start += windowSize.Milliseconds() / 2; return s },
			want: SinkResult{Unexpected: 1, Missing: 1}},
		{name: "windows of a key swapped", brk: func(s [][]WindowOut) [][]WindowOut {
			i := next(s[0])
			s[0][0], s[0][i] = s[0][i], s[0][0]
			return s
		}, want: SinkResult{OutOfOrder: 1}},
		{name: "malformed record", brk: func(s [][]WindowOut) [][]WindowOut { return s }, extra: "1735689600000,k00001,3",
			want: SinkResult{Unexpected: 1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			streams := c.brk(intact())
			lines := make([][]string, len(streams))
			for i, s := range streams {
				for _, w := range s {
					lines[i] = append(lines[i], string(appendWindow(nil, w)))
				}
			}
			if c.extra != "" {
				lines[0] = append(lines[0], c.extra)
			}
			res := SinkResult{Sink: "windows"}
			res = x.CheckWindows(res, parseStreams(&res, lines, parseWindow))
			t.Log(res, res.Examples)
			got := SinkResult{Missing: res.Missing, Duplicates: res.Duplicates, OutOfOrder: res.OutOfOrder,
				WrongTotals: res.WrongTotals, Unexpected: res.Unexpected}
			if !reflect.DeepEqual(got, c.want) || res.Anomalies() != c.want.Anomalies() {
				t.Errorf("got %v; want %v", got, c.want)
			}
			if want := len(x.windows) - c.want.Missing; res.Verified != want {
				t.Errorf("verified %d windows, want %d", res.Verified, want)
			}
		})
	}
}
