package control_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/exactlyonce/exactly/control"
)

// staticJob is a job whose status is fixed, for tests of the page's views.
type staticJob struct{ st control.Status }

func (j staticJob) Status() control.Status                          { return j.st }
func (staticJob) Savepoint(context.Context) (string, error)         { return "", nil }
func (staticJob) StopWithSavepoint(context.Context) (string, error) { return "", nil }
func (staticJob) Stop()                                             {}

// openStaticPage serves st's page and opens it in headless Chromium,
// which it closes at the end of the test; the context is the browser's.
func openStaticPage(t *testing.T, st control.Status) context.Context {
	t.Helper()
	path := chromium(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := control.Serve(ln, staticJob{st}, control.Config{})
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Flag("headless", true))...)
	ctx, cancel := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute) // a guard against a hang
	t.Cleanup(func() { cancelTimeout(); cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx, chromedp.Navigate("http://"+srv.Addr()+"/")); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// TestPageShowsExceptions: the exceptions view lists the job's current
// failure, the failures it restarted after and the reasons of aborted
// checkpoints, newest first, each with its whole text (a panic's stack
// included) on a click.
func TestPageShowsExceptions(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	st := control.Status{Version: control.Version, Job: "failing", State: control.StateRestarting, Started: t0,
		Error:    "sink out: connection refused\nat line two",
		Restarts: []control.Restart{{Time: t0.Add(time.Second), Attempt: 1, Error: "operator parse[0]: panic: index out of range\ngoroutine 7 [running]:\nmain.parse()"}},
		Checkpoints: control.Checkpoints{History: []control.Checkpoint{
			{ID: 4, Kind: "checkpoint", Status: control.CheckpointAborted, Triggered: t0.Add(2 * time.Second), Reason: "subtask count[0] did not acknowledge within 1m0s", Commits: []control.Commit{}},
		}, Pending: []control.PendingCommit{}},
		Graph:     control.Graph{Nodes: []control.Node{}, Edges: []control.Edge{}},
		Operators: []control.Operator{}, Lag: []control.SplitLag{}, Throughput: []control.ThroughputPoint{}, Configuration: []control.Setting{},
	}
	ctx := openStaticPage(t, st)
	if err := chromedp.Do(ctx, chromedp.WaitVisible(`#exceptions details`)); err != nil {
		t.Fatal(err)
	}
	summaries, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll('#exceptions summary')].map(s => s.textContent)`))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"the job (restarting): sink out: connection refused", "checkpoint 4 aborted: subtask count[0] did not acknowledge", "restart 1: operator parse[0]: panic: index out of range"}
	if len(summaries) != len(want) {
		t.Fatalf("the exceptions view lists %q; want %d entries", summaries, len(want))
	}
	for i, w := range want {
		if !strings.Contains(summaries[i], w) {
			t.Errorf("exception %d is %q; want it to hold %q (newest first)", i, summaries[i], w)
		}
	}
	if err := chromedp.Do(ctx, chromedp.Click(`#exceptions li:nth-child(3) summary`), chromedp.WaitVisible(`#exceptions li:nth-child(3) pre`)); err != nil {
		t.Fatal(err)
	}
	whole, err := pageText(ctx, `#exceptions li:nth-child(3) pre`)
	if err != nil || !strings.Contains(whole, "goroutine 7 [running]:") {
		t.Fatalf("the restart's whole text: %q, %v; want its stack", whole, err)
	}
}
