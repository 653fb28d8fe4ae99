package control_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/exactlyonce/exactly/control"
)

// TestPageShowsClusterTasks loads the page of a cluster instance in
// headless Chromium: it shows the instance's tasks with their stage,
// state, epoch and last checkpoint, and the group's assignment with this
// instance marked.
func TestPageShowsClusterTasks(t *testing.T) {
	now := time.Now()
	st := control.Status{Version: control.Version, Job: "orders", State: control.StateRunning, Started: now, Storage: "s3://bucket/orders",
		Operators: []control.Operator{}, Restarts: []control.Restart{}, Lag: []control.SplitLag{}, Configuration: []control.Setting{},
		Cluster: &control.Cluster{Group: "exactly-orders", Member: "m-1", AssignmentTime: now,
			Tasks: []control.Task{
				{Topic: "orders", Partition: 0, Stage: 0, State: control.TaskRunning, Since: now, Runs: 1, Epoch: 3, Checkpoint: 41, CheckpointTime: now},
				{Topic: "orders-per-user-0-repartition", Partition: 2, Stage: 1, State: control.TaskParked, Since: now, Runs: 2, Epoch: 0, Error: "corrupt checkpoint\nstack"},
			},
			Assignment: []control.Member{
				{Member: "m-1", Client: "host-a", Host: "/10.0.0.1", Tasks: []string{"orders/0", "orders-per-user-0-repartition/2"}},
				{Member: "m-2", Client: "host-b", Host: "/10.0.0.2", Tasks: []string{"orders/1"}},
			}}}
	st.Checkpoints.History, st.Checkpoints.Pending = []control.Checkpoint{}, []control.PendingCommit{}
	ctx := openStaticPage(t, st)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#tasks tr[data-task="orders/0"]`), chromedp.WaitVisible(`#assignment tr[data-member="m-2"]`)); err != nil {
		t.Fatalf("the page's cluster section: %v", err)
	}
	for sel, want := range map[string]string{
		`#tasks tr[data-task="orders/0"]`:                        "orders/0\t0\trunning\t",
		`#tasks tr[data-task="orders-per-user-0-repartition/2"]`: "parked",
		`#assignment tr[data-member="m-1"]`:                      "m-1 (this instance)\thost-a\t/10.0.0.1\torders/0 orders-per-user-0-repartition/2",
		`#assignment-meta`:                                       "2 members of group exactly-orders",
	} {
		got, err := pageText(ctx, sel)
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		if !strings.Contains(got, want) {
			t.Errorf("%s shows %q, want it to contain %q", sel, got, want)
		}
	}
	got, err := pageText(ctx, `#tasks tr[data-task="orders/0"]`)
	if err != nil || !strings.Contains(got, "\t3\t41 at ") {
		t.Errorf("task orders/0 shows %q (%v), want its epoch 3 and checkpoint 41", got, err)
	}
	if parked, _ := pageText(ctx, `#tasks tr[data-task="orders-per-user-0-repartition/2"]`); strings.Contains(parked, "stack") {
		t.Errorf("the parked task's error shows more than its first line: %q", parked)
	}
}
