package commit

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/sink"
)

// silentCommitter never answers a commit: it waits for its context, as a
// driver does on a connection whose packets a network holds.
type silentCommitter struct{ calls int }

func (c *silentCommitter) Commit(ctx context.Context, _ sink.Committable) error {
	c.calls++
	<-ctx.Done()
	return ctx.Err()
}
func (c *silentCommitter) Abort(context.Context, sink.Committable) error       { return nil }
func (c *silentCommitter) Fence(context.Context, checkpoint.ID) error          { return nil }
func (c *silentCommitter) AbortLingering(context.Context, checkpoint.ID) error { return nil }
func (c *silentCommitter) Close() error                                        { return nil }

// silentSink opens c as its committer.
type silentSink struct{ c *silentCommitter }

func (s silentSink) NewWriter(context.Context, sink.WriterInfo) (sink.Writer[int], error) {
	panic("not used")
}
func (s silentSink) NewCommitter(context.Context, sink.CommitterInfo) (sink.Committer, error) {
	return s.c, nil
}

// TestRestoreCommitWithoutAnswerFails: a restore whose commit gets no
// answer fails after its retries, each bounded by CommitTimeout, instead of
// hanging (the 1,000-fault torture run of seed 20261215 hung 90 s on a
// PostgreSQL connection held by a stuck-write fault during a restore).
func TestRestoreCommitWithoutAnswerFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &silentCommitter{}
		entry := format.EncodeCommittable(sink.Committable{Checkpoint: 3, Subtask: 0, Data: []byte("txn")})
		rc := runtime.RestoreContext{Job: "j", Operator: "out", Checkpoint: 3, Entries: [][]byte{entry},
			Commit: runtime.CommitPolicy{Retries: 2, Timeout: 5 * time.Second}}
		r, err := Restore[int](context.Background(), silentSink{c}, rc)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		err = r.Finish(context.Background())
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "no answer within CommitTimeout 5s") {
			t.Fatalf("Finish = %v; want the commit to fail, naming CommitTimeout", err)
		}
		if c.calls != 3 {
			t.Fatalf("%d commit attempts, want 3 (1 and 2 retries)", c.calls)
		}
		t.Logf("failed after %v (fake clock): %v", took, err)
	})
}
