package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/control"
	"github.com/exactlyonce/exactly/internal/testjob"
)

// TestStatusSavepointStop runs status, savepoint and stop --savepoint
// against a running job, then checkpoints ls and inspect on what it left.
func TestStatusSavepointStop(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir()) // no local token of the job
	r := testjob.Start(t)
	cpDir, tokenFile := r.CheckpointDir, r.TokenFile
	addr := r.ControlAddr()
	ctx := context.Background()
	run := func(cmd string, args ...string) (string, error) {
		var out strings.Builder
		err := runControl(ctx, cmd, args, &out)
		return out.String(), err
	}

	out, err := run("status", "--addr", addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"job " + testjob.Name + ": running", "numbers", "count", "OPERATOR", "checkpoints:", "completed", "restarts: 0", "lag:", "numbers[0] gen-0",
		"WATERMARK", testjob.EventEpoch.Format("2006-01-02 ")} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
	out, err = run("status", "--addr", addr, "--subtasks")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"SUBTASK", "TASK", "numbers[0]", "count[0] (count → out)"} {
		if !strings.Contains(out, want) {
			t.Errorf("status --subtasks lacks %q:\n%s", want, out)
		}
	}
	out, err = run("status", "--addr", addr, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var st control.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil || st.Job != testjob.Name || len(st.Graph.Nodes) != 3 {
		t.Fatalf("status --json: %v, %+v", err, st)
	}

	if _, err := run("savepoint", "--addr", addr); err == nil || !strings.Contains(err.Error(), "--token-file is missing, and there is no local token of job") {
		t.Errorf("savepoint without --token-file: %v", err)
	}
	wrong := filepath.Join(t.TempDir(), "wrong")
	if err := os.WriteFile(wrong, []byte("not-the-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := run("stop", "--addr", addr, "--token-file", wrong); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("stop with a wrong token: %v, want a 403", err)
	}

	out, err = run("savepoint", "--addr", addr, "--token-file", tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	sp := strings.TrimSpace(out)
	if _, err := os.Stat(filepath.Join(sp, "_metadata")); err != nil || !strings.HasPrefix(sp, cpDir) {
		t.Fatalf("savepoint printed %q: %v", sp, err)
	}
	out, err = run("stop", "--addr", addr, "--token-file", tokenFile, "--savepoint")
	if err != nil {
		t.Fatal(err)
	}
	final := strings.TrimSpace(out)
	if err := r.Wait(); err != nil {
		t.Fatalf("after stop --savepoint the job ended with %v", err)
	}
	if !r.Stopped() {
		t.Error("after stop --savepoint Stopped() = false: the run would say its input finished")
	}
	if _, err := run("status", "--addr", addr, "--timeout", "5s"); err == nil || !strings.Contains(err.Error(), "is the job running") {
		t.Errorf("status of an ended job: %v", err)
	}

	var ls strings.Builder
	if err := runCheckpoints([]string{"ls", cpDir}, &ls); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"savepoint", "checkpoint", "cli-test", sp, final} {
		if !strings.Contains(ls.String(), want) {
			t.Errorf("checkpoints ls lacks %q:\n%s", want, ls.String())
		}
	}
	var insp strings.Builder
	if err := runCheckpoints([]string{"inspect", final}, &insp); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"savepoint", "operator numbers (parallelism 1)", "position of split gen-0", "position of split gen-1",
		"operator count", "key groups [0, 128)", "state bytes per key group (16 groups)", "operator out", "pending committable"} {
		if !strings.Contains(insp.String(), want) {
			t.Errorf("checkpoints inspect lacks %q:\n%s", want, insp.String())
		}
	}
	var js strings.Builder
	if err := runCheckpoints([]string{"inspect", cpDir, "--json"}, &js); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"kind": "savepoint"`) {
		t.Errorf("inspect of the storage should show the latest, the final savepoint:\n%.600s", js.String())
	}
}

// TestStopWithoutSavepoint stops a job through `exactly stop`.
func TestStopWithoutSavepoint(t *testing.T) {
	r := testjob.Start(t)
	var out strings.Builder
	if err := runControl(context.Background(), "stop", []string{"--addr", r.ControlAddr(), "--token-file", r.TokenFile}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "stopping") {
		t.Errorf("stop printed %q", out.String())
	}
	if err := r.Wait(); err != nil {
		t.Fatalf("a job stopped through the API ended with %v, want nil", err)
	}
	if !r.Stopped() {
		t.Error("after stop Stopped() = false: the run would say its input finished")
	}
}

// TestControlFlagErrors checks that each bad flag is one line naming the
// flag, the value and a valid example.
func TestControlFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		args []string
		want []string
	}{
		{"status", []string{"--addr", "nowhere"}, []string{`"nowhere"`, "-addr", "--addr 127.0.0.1:8081"}},
		{"savepoint", []string{"--timeout", "soon", "--token-file", "t"}, []string{`"soon"`, "-timeout", "--timeout 30s"}},
		{"stop", []string{"--timeout", "-1s", "--token-file", "t"}, []string{`"-1s"`, "--timeout 30s"}},
		{"status", []string{"--savepoint"}, []string{"-savepoint", "exactly status --help"}},
		{"status", []string{"extra"}, []string{`unexpected argument "extra"`}},
	} {
		_, err := parseControlFlags(tc.cmd, tc.args, new(strings.Builder))
		if err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s %q: %v, want a one-line error", tc.cmd, tc.args, err)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s %q: %q lacks %q", tc.cmd, tc.args, err, w)
			}
		}
	}
	var help strings.Builder
	if _, err := parseControlFlags("stop", []string{"--help"}, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "-savepoint") {
		t.Errorf("stop --help: %v\n%s", err, help.String())
	}
}

// TestCheckpointsErrors checks the refusals of checkpoints ls|inspect, and
// that a directory that is no checkpoint storage is left untouched.
func TestCheckpointsErrors(t *testing.T) {
	plain := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "the subcommand is nothing"},
		{[]string{"rm", plain}, `the subcommand is "rm"`},
		{[]string{"ls"}, "DIR_OR_URL is missing"},
		{[]string{"ls", filepath.Join(plain, "missing")}, "no such file"},
		{[]string{"ls", plain}, "not a job's checkpoint directory"},
		{[]string{"inspect", plain, "--id", "x"}, `invalid value "x" for flag -id: not a checkpoint id: use a positive number, such as --id 12`},
	} {
		err := runCheckpoints(tc.args, new(strings.Builder))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("checkpoints %q: %v, want %q", tc.args, err, tc.want)
		}
	}
	if entries, _ := os.ReadDir(plain); len(entries) != 0 {
		t.Errorf("checkpoints wrote into a directory that is no checkpoint storage: %v", entries)
	}
}

func TestVersion(t *testing.T) {
	v := version()
	if !strings.HasPrefix(v, "exactly ") || !strings.Contains(v, goruntime.Version()) {
		t.Errorf("version() = %q, want exactly … and the Go version", v)
	}
}

// TestStatusOfAClusterInstance prints the status of an instance of a job
// run on a cluster: its tasks, then the group's assignment.
func TestStatusOfAClusterInstance(t *testing.T) {
	at := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	st := control.Status{Job: "orders", State: control.StateRunning, Started: at, Storage: "s3://bucket/orders",
		Cluster: &control.Cluster{Group: "exactly-orders", Member: "m-1", AssignmentTime: at,
			Tasks: []control.Task{
				{Topic: "orders", Partition: 0, Stage: 0, State: control.TaskRunning, Since: at, Runs: 1, Epoch: 3, Checkpoint: 41, CheckpointTime: at},
				{Topic: "orders-per-user-0-repartition", Partition: 2, Stage: 1, State: control.TaskParked, Since: at, Runs: 2, Error: "corrupt checkpoint\nstack"},
			},
			Assignment: []control.Member{
				{Member: "m-1", Client: "host-a", Host: "/10.0.0.1", Tasks: []string{"orders/0", "orders-per-user-0-repartition/2"}},
				{Member: "m-2", Client: "host-b", Host: "/10.0.0.2", Tasks: []string{"orders/1"}},
			}}}
	var out strings.Builder
	printStatus(&out, st, false)
	want := `job orders: instance m-1 of group exactly-orders, running since 2026-12-05T10:00:00Z
storage s3://bucket/orders

tasks of this instance: 2
TASK                             STAGE  STATE    SINCE     EPOCH  CHECKPOINT      RUNS  RESTARTS  ERROR
orders/0                         0      running  10:00:00  3      41 at 10:00:00  1     0         
orders-per-user-0-repartition/2  1      parked   10:00:00  0      -               2     0         corrupt checkpoint

group assignment (2 members, as of 10:00:00):
  m-1 (this instance), client host-a at /10.0.0.1: 2 tasks
    orders/0
    orders-per-user-0-repartition/2
  m-2, client host-b at /10.0.0.2: 1 tasks
    orders/1
`
	if out.String() != want {
		t.Errorf("exactly status of a cluster instance printed:\n%s\nwant:\n%s", out.String(), want)
	}
}
