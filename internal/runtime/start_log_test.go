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
