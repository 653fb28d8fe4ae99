package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/exactlyonce/exactly/internal/demo"
	"github.com/exactlyonce/exactly/metrics"
	"github.com/exactlyonce/exactly/runtime"
)

// TestCollectorServesTheJobsMetrics runs the demo job to its end, then
// scrapes a registry with the job's collector over HTTP and compares the
// series with the job's own counters.
func TestCollectorServesTheJobsMetrics(t *testing.T) {
	const events = 20_000
	var m *runtime.Metrics
	c := demo.Config{Dir: t.TempDir(), Events: events, Customers: 100, Seed: 1, Parallelism: 2,
		CheckpointInterval: 20 * time.Millisecond, Discard: true}
	c.OnStart = func(got *runtime.Metrics) { m = got }
	if err := demo.Run(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	col := metrics.NewCollector("demo", m)
	reg.MustRegister(col)
	if problems, err := testutil.CollectAndLint(col); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}

	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	last := m.LastCheckpoint.Load()
	if last == nil || m.Completed.Load() == 0 {
		t.Fatal("the job completed no checkpoint")
	}
	lines := strings.Split(string(body), "\n")
	for _, want := range []string{
		fmt.Sprintf(`exactly_checkpoints_completed_total{job_name="demo"} %d`, m.Completed.Load()),
		`exactly_checkpoints_aborted_total{job_name="demo"} 0`,
		`exactly_restarts_total{job_name="demo"} 0`,
		`exactly_checkpoints_skipped_corrupt_total{job_name="demo"} 0`,
		fmt.Sprintf(`exactly_checkpoint_last_id{job_name="demo"} %d`, last.ID),
		fmt.Sprintf(`exactly_checkpoint_duration_seconds_count{job_name="demo"} %d`, m.Completed.Load()),
		fmt.Sprintf(`exactly_checkpoint_duration_seconds_bucket{job_name="demo",le="+Inf"} %d`, m.Completed.Load()),
		fmt.Sprintf(`exactly_operator_records_total{job_name="demo",operator="orders"} %d`, events),
		fmt.Sprintf(`exactly_operator_records_total{job_name="demo",operator="running-totals"} %d`, events),
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("scrape lacks the line %q; got:\n%s", want, body)
		}
	}
	for _, gauge := range []string{"exactly_checkpoint_last_duration_seconds", "exactly_checkpoint_last_completion_timestamp_seconds", "exactly_checkpoint_last_size_bytes"} {
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, gauge+`{job_name="demo"} `) }) {
			t.Errorf("scrape lacks %s; got:\n%s", gauge, body)
		}
	}
	if d := last.Completed.Sub(last.Triggered); d <= 0 {
		t.Errorf("last checkpoint took %v: not after its trigger", d)
	}
	if last.StateBytes <= 0 {
		t.Errorf("last checkpoint's state is %d bytes: the running totals have state", last.StateBytes)
	}
}

// TestCollectorBeforeTheFirstCheckpoint checks that a job without a
// completed checkpoint exports its counters and no checkpoint gauge.
func TestCollectorBeforeTheFirstCheckpoint(t *testing.T) {
	var m runtime.Metrics
	col := metrics.NewCollector("idle", &m)
	if n := testutil.CollectAndCount(col); n != 5 {
		t.Errorf("collected %d series, want the 4 job counters and the empty histogram", n)
	}
	if n := testutil.CollectAndCount(col, "exactly_checkpoint_last_id"); n != 0 {
		t.Errorf("exactly_checkpoint_last_id exported before any checkpoint")
	}
}

// TestLastCheckpointSurvivesARestart runs the demo job, then starts it
// again on the same checkpoints: from its start, the new run reports the
// checkpoint it restored, so an alert on the last completion's age does
// not go blind after a crash.
func TestLastCheckpointSurvivesARestart(t *testing.T) {
	c := demo.Config{Dir: t.TempDir(), Events: 5_000, Customers: 10, Seed: 1, Parallelism: 2,
		CheckpointInterval: 20 * time.Millisecond, Discard: true}
	var first *runtime.Metrics
	c.OnStart = func(m *runtime.Metrics) { first = m }
	if err := demo.Run(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	want := first.LastCheckpoint.Load()
	var atStart *runtime.CheckpointStats
	c.OnStart = func(m *runtime.Metrics) { atStart = m.LastCheckpoint.Load() }
	if err := demo.Run(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	if atStart == nil || atStart.ID != want.ID || atStart.StateBytes != want.StateBytes {
		t.Fatalf("at the restart's start the last checkpoint is %+v, want the restored %+v", atStart, want)
	}
}
