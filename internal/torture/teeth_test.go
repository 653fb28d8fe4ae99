package torture

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/stream"
)

// The teeth tests run the torture job's keyed totals on generated events
// into a file sink that is deliberately broken, kill the job process once
// right after the sink prepared checkpoint 2 (so that checkpoint never
// completes), restart it, and check that the checker finds exactly the
// anomaly the breakage causes.

var teethWorkload = Workload{Events: 3000, Keys: 20, Seed: 7}

// Breakages of brokenSink.
const (
	correct         = "correct"           // a correct sink: the control
	commitAtPrepare = "commit-at-prepare" // makes a transaction visible at Prepare
	dropOnRestart   = "drop-on-restart"   // loses the first batch written after a restart
)

// brokenSink wraps the file sink with a breakage. In the first process
// (no marker file yet) it SIGKILLs its process after preparing checkpoint 2.
type brokenSink struct {
	*file.Sink[Out]
	mode   string
	marker string // exists once a process has been killed
}

func (b brokenSink) NewWriter(ctx context.Context, info sink.WriterInfo) (sink.Writer[Out], error) {
	w, err := b.Sink.NewWriter(ctx, info)
	if err != nil {
		return nil, err
	}
	c, err := b.NewCommitter(ctx, sink.CommitterInfo{Job: info.Job, Sink: info.Sink})
	if err != nil {
		return nil, err
	}
	_, statErr := os.Stat(b.marker)
	return &brokenWriter{Writer: w, c: c, b: b, subtask: info.Subtask, restarted: statErr == nil}, nil
}

type brokenWriter struct {
	sink.Writer[Out]
	c         sink.Committer
	b         brokenSink
	subtask   int
	restarted bool // a process was killed before this writer opened
	dropped   bool
}

func (w *brokenWriter) Write(ctx context.Context, batch []Out) error {
	if w.b.mode == dropOnRestart && w.restarted && !w.dropped {
		w.dropped = true
		return nil
	}
	return w.Writer.Write(ctx, batch)
}

func (w *brokenWriter) Prepare(ctx context.Context, id uint64) ([]byte, error) {
	data, err := w.Writer.Prepare(ctx, id)
	if err != nil || data == nil {
		return data, err
	}
	if w.b.mode == commitAtPrepare {
		if err := w.c.Commit(ctx, sink.Committable{CheckpointID: id, Subtask: w.subtask, Data: data}); err != nil {
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

// runTeethChild runs the job once, in a crashtest child.
func runTeethChild(t *testing.T) {
	dir := os.Getenv("TEETH_DIR")
	src, err := generator.New(generator.Options{Count: uint64(teethWorkload.Events), Splits: 1, Rate: 6000}, func(i uint64) Event {
		return teethEvents[i]
	})
	if err != nil {
		t.Fatal(err)
	}
	fs, err := file.NewSink(filepath.Join(dir, "files"), appendOut, file.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New("teeth")
	outs := Totals(stream.Source(j, "events", src), 1)
	stream.SinkTo[Out](outs, "files", brokenSink{Sink: fs, mode: os.Getenv("TEETH_MODE"), marker: filepath.Join(dir, "killed")})
	if err := j.Run(context.Background(), stream.Options{CheckpointDir: filepath.Join(dir, "ckpt"), CheckpointInterval: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
}

var teethEvents = teethWorkload.Generate()

// TestCheckerHasTeeth shows that the checker catches a sink that commits
// at Prepare (duplicates after the replay) and one that drops a batch
// after a restart (missing events), and passes a correct sink under the
// same kill.
func TestCheckerHasTeeth(t *testing.T) {
	for _, mode := range []string{correct, commitAtPrepare, dropOnRestart} {
		t.Run(mode, func(t *testing.T) {
			if crashtest.IsChild() {
				runTeethChild(t)
				return
			}
			dir := t.TempDir()
			rep := crashtest.Run(t, crashtest.Options{Kills: 1, Env: []string{"TEETH_DIR=" + dir, "TEETH_MODE=" + mode}})
			if rep.Kills != 1 {
				t.Fatalf("the job was killed %d times, want once", rep.Kills)
			}
			res, err := CheckFiles(NewExpected(teethWorkload), "files", filepath.Join(dir, "files"))
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
					t.Errorf("drop on restart: missing %d, duplicates %d; want missing events and no duplicates", res.Missing, res.Duplicates)
				}
			}
		})
	}
}
