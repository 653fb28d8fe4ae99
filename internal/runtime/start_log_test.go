package runtime_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/exactlyonce/exactly/internal/testlog"
	"github.com/exactlyonce/exactly/internal/testwait"
	"github.com/exactlyonce/exactly/stream"
)

// TestStartIsLogged: a start says at INFO what starts — the job, its
// incarnation and epoch, its storage, and where its input resumes: from
// the beginning, then, on the next start, from the checkpoint the first
// run left.
func TestStartIsLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		out := newTxSink()
		for run, want := range []string{
			"job started from the beginning of its input",
			"job started from its latest checkpoint",
		} {
			logs := &testlog.Buffer{}
			opts := stream.Options{CheckpointDir: dir, CheckpointInterval: 10 * time.Millisecond,
				Logger: slog.New(slog.NewTextHandler(logs, nil))}
			if err := intsJob(100, out).Run(context.Background(), opts); err != nil {
				t.Fatal(err)
			}
			line := ""
			for l := range strings.Lines(logs.String()) {
				if strings.Contains(l, "job started") {
					line = l
				}
			}
			for _, part := range []string{"level=INFO", want, "incarnation=", fmt.Sprint("epoch=", run+1), "storage=" + dir} {
				if !strings.Contains(line, part) {
					t.Fatalf("run %d: the start line %q lacks %q; logs:\n%s", run+1, line, part, logs)
				}
			}
			if run == 1 && !strings.Contains(line, "checkpoint=") {
				t.Fatalf("the second start does not name its checkpoint: %q", line)
			}
		}
	})
}

// TestRestoreFromTheJobsOwnLatestSavepoint: `exactly run --from` a
// savepoint taken into the job's own checkpoint directory, the latest one
// there, restores it and says so; it logged "RestoreFrom is ignored … a
// checkpoint at least as new" about the very savepoint it restored.
func TestRestoreFromTheJobsOwnLatestSavepoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		out := newTxSink()
		ctx := context.Background()
		r, err := intsJob(3000, out).Start(ctx, stream.Options{CheckpointDir: dir, CheckpointInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		testwait.For(t, out.written.Reached(300), time.Minute, "300 records at the sink", nil)
		sp, err := r.StopWithSavepoint(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := r.Wait(); err != nil {
			t.Fatal(err)
		}
		logs := &testlog.Buffer{}
		opts := stream.Options{CheckpointDir: dir, RestoreFrom: sp, CheckpointInterval: 10 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(logs, nil))}
		if err := intsJob(3000, out).Run(ctx, opts); err != nil {
			t.Fatal(err)
		}
		out.check(t, 3000)
		if strings.Contains(logs.String(), "RestoreFrom is ignored") {
			t.Fatalf("the restore from the job's own latest savepoint says RestoreFrom is ignored:\n%s", logs)
		}
		if !strings.Contains(logs.String(), "job started from the savepoint it was given (RestoreFrom)") {
			t.Fatalf("the start does not say it restored the savepoint it was given:\n%s", logs)
		}
	})
}
