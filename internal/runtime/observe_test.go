package runtime

import (
	"fmt"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/control"
)

// TestObservationsOfCheckpoints follows checkpoints through the history
// the control API shows: completion with sizes, each sink subtask's
// commit, the pending commits until the last, the commit latency, an
// abort, and the bounds of the history and the restarts.
func TestObservationsOfCheckpoints(t *testing.T) {
	var m Metrics
	o := &m.obs
	o.addSink("db", 2)
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }

	o.triggered(1, checkpoint.KindCheckpoint, ms(0))
	o.aligned(1, 30*time.Millisecond)
	o.aligned(1, 10*time.Millisecond)
	o.completed(&CheckpointStats{ID: 1, Triggered: ms(0), Completed: ms(100), StateBytes: 10, SharedBytes: 5})
	o.committed(1, "db", ms(150))
	pending := pendingCommits(o.checkpoints, o.completedAt, ms(170))
	if len(pending) != 1 || pending[0] != (control.PendingCommit{Checkpoint: 1, Sink: "db", Waiting: 1, SinceMillis: 70}) {
		t.Fatalf("after one of two commits, pending %+v", pending)
	}
	if _, ok := m.CommitLatencies()["db"]; ok {
		t.Fatal("a commit latency before every subtask committed")
	}
	o.committed(1, "db", ms(300))
	if p := pendingCommits(o.checkpoints, o.completedAt, ms(310)); len(p) != 0 {
		t.Fatalf("after both commits, pending %+v", p)
	}
	c := o.checkpoints[0]
	want := control.Checkpoint{ID: 1, Kind: "checkpoint", Status: control.CheckpointCompleted, Triggered: t0, DurationMillis: 100, AlignmentMillis: 30,
		StateBytes: 10, SharedBytes: 5, Commits: []control.Commit{{Sink: "db", Subtasks: 2, Committed: 2, LatencyMillis: 200}}}
	if fmt.Sprint(c) != fmt.Sprint(want) {
		t.Fatalf("checkpoint 1:\n%+v\nwant\n%+v", c, want)
	}
	if got := m.CommitLatencies()["db"]; got != 200*time.Millisecond {
		t.Fatalf("commit latency %v, want 200ms", got)
	}

	o.triggered(2, checkpoint.KindSavepoint, ms(1000))
	o.aborted(2, "timed out", ms(1500))
	o.aborted(2, "again", ms(1600)) // a second abort changes nothing
	if c := o.checkpoints[1]; c.Status != control.CheckpointAborted || c.Reason != "timed out" || c.DurationMillis != 500 || c.Kind != "savepoint" {
		t.Fatalf("aborted savepoint 2: %+v", c)
	}
	// The pending commits are those of the latest completed checkpoint,
	// not of an aborted one after it.
	if p := pendingCommits(o.checkpoints, o.completedAt, ms(2000)); len(p) != 0 {
		t.Fatalf("pending %+v", p)
	}

	for id := checkpoint.ID(3); id < 3+control.MaxCheckpoints; id++ {
		o.triggered(id, checkpoint.KindCheckpoint, ms(int(id)*1000))
		o.completed(&CheckpointStats{ID: id, Triggered: ms(int(id) * 1000), Completed: ms(int(id)*1000 + 5)})
	}
	if n, first := len(o.checkpoints), o.checkpoints[0].ID; n != control.MaxCheckpoints || first != 3 {
		t.Fatalf("history of %d from %d, want the latest %d from 3", n, first, control.MaxCheckpoints)
	}
	if _, ok := o.completedAt[1]; ok || len(o.completedAt) != control.MaxCheckpoints {
		t.Fatalf("completion times kept for %d checkpoints, want those of the history only", len(o.completedAt))
	}
	for i := range control.MaxRestarts + 3 {
		o.restarted(control.Restart{Attempt: i, Error: fmt.Sprint("failure ", i)})
	}
	if n := len(o.restarts); n != control.MaxRestarts || o.restarts[0].Attempt != 3 || o.lastErr != fmt.Sprint("failure ", control.MaxRestarts+2) {
		t.Fatalf("%d restarts from attempt %d, last error %q", n, o.restarts[0].Attempt, o.lastErr)
	}
}
