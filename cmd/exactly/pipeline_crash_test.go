package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the driver of connectors/sqlite

	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/internal/crashtest/crashtesting"
)

// crashPipeline is the pipeline of the crash test: generated orders, a
// filter, a count, sum and max per customer and 10-second window of event
// time, into SQLite. ${RATE} throttles the generator.
const crashPipeline = `
name: crash-orders
parallelism: 2
source:
  kind: generator
  count: 20000
  splits: 4
  rate: ${RATE:-0}
  fields:
    customer: '"c" + string(index % 7)'
    amount: index % 11 + 1
    ts: index * 10
event_time:
  field: ts
transforms:
  - filter: amount > 2
  - key_by: customer
  - aggregate:
      name: per-window
      window: {kind: tumbling, size: 10s}
      values:
        orders: count()
        total: sum(amount)
        largest: max(amount)
sink:
  kind: sqlite
  path: orders.db
  table: windows
checkpoint:
  interval: 100ms
`

// TestRunPipelineCrashIsExactlyOnce runs 'exactly run' on a pipeline file
// in a child process, SIGKILLs it at least 15 times (at random moments and
// at every point of the checkpoint protocol), restarts it each time, and
// compares the committed table with the table of a failure-free run of the
// same file.
func TestRunPipelineCrashIsExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test: skipped with -short")
	}
	dir := os.Getenv("EXACTLY_PIPELINE_CRASH_DIR")
	if crashtest.IsChild() {
		t.Chdir(dir)
		if err := runPipeline(context.Background(), []string{"pipeline.yaml", "--log-level", "error", "--control-addr", "127.0.0.1:0"}, io.Discard); err != nil {
			t.Fatal(err)
		}
		return
	}
	dir = t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config")) // the children's local token
	writePipeline(t, dir)
	// 20,000 orders at 500/s (40s of input) outlast the kill schedule even
	// on a fast machine, where a run lasts about 2s; the final run
	// reads the rest unthrottled.
	rep := crashtesting.RunLive(t, crashtest.Options{Kills: crashtesting.Sized(15, 40), MaxDelay: time.Second,
		Env: []string{"EXACTLY_PIPELINE_CRASH_DIR=" + dir, "RATE=500"}, FinalEnv: []string{"RATE=0"}}, 10)
	if rep.ByKind["metadata-written"] == 0 {
		t.Errorf("no kill between checkpoint completion and commit: %v", rep)
	}
	crashed := windowRows(t, filepath.Join(dir, "orders.db"))

	ref := t.TempDir()
	writePipeline(t, ref)
	t.Chdir(ref)
	t.Setenv("RATE", "0")
	if err := runPipeline(context.Background(), []string{"pipeline.yaml", "--log-level", "error", "--control-addr", "127.0.0.1:0"}, io.Discard); err != nil {
		t.Fatal(err)
	}
	want := windowRows(t, filepath.Join(ref, "orders.db"))
	// 20,000 orders 10ms apart span 200s: 20 windows of each of 7 customers.
	if len(want) != 140 {
		t.Fatalf("the failure-free run committed %d rows, want 140", len(want))
	}
	if !slices.Equal(crashed, want) {
		t.Errorf("after %d kills the table differs from the failure-free run's:\n%s", rep.Kills, diffLines(crashed, want))
	}
}

// writePipeline writes the crash test's pipeline file into dir.
func writePipeline(t *testing.T, dir string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "pipeline.yaml"), []byte(crashPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
}

// windowRows returns the rows of the windows table, sorted, one string each.
func windowRows(t *testing.T, path string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT key, window_start, window_end, orders, total, largest FROM windows")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var key, start, end string
		var orders, total, largest int
		if err := rows.Scan(&key, &start, &end, &orders, &total, &largest); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("%s %s %s %d %d %d", key, start, end, orders, total, largest))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// diffLines lists the lines only in got (+) and only in want (-).
func diffLines(got, want []string) string {
	var b strings.Builder
	for _, g := range got {
		if !slices.Contains(want, g) {
			fmt.Fprintf(&b, "+ %s\n", g)
		}
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			fmt.Fprintf(&b, "- %s\n", w)
		}
	}
	if n := len(got) - len(want); n != 0 {
		fmt.Fprintf(&b, "(%d rows, want %d)\n", len(got), len(want))
	}
	return b.String()
}
