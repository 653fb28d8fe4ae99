package metrics_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/internal/testjob"
	"github.com/exactlyonce/exactly/metrics"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// runTotals runs a small keyed job over dir to its end: a generator source
// "orders" of events amounts spread over customers customers, each
// customer's running total in keyed state ("running-totals"), and an
// exactly-once file sink. onStart is called with the job's metrics once it
// started. A second call on the same dir restores the job's last
// checkpoint.
func runTotals(t *testing.T, dir string, events uint64, customers uint64, onStart func(*stream.Metrics)) {
	t.Helper()
	src, err := generator.New(generator.Options{Count: events, Splits: 8}, func(i uint64) uint64 { return i })
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New("totals")
	orders := stream.Source(j, "orders", src, stream.Parallelism(2))
	byCustomer := stream.KeyBy(orders, func(i uint64) string { return "c" + strconv.FormatUint(i%customers, 10) }, state.StringCodec{})
	totals := stream.Process(byCustomer, "running-totals", func(ctx *stream.Context[string]) (stream.ProcessFunc[string, uint64, int64], error) {
		total, err := state.NewValueState(ctx.State(), "total", state.Int64Codec{})
		if err != nil {
			return stream.ProcessFunc[string, uint64, int64]{}, err
		}
		return stream.ProcessFunc[string, uint64, int64]{
			Process: func(_ *stream.Context[string], amount uint64, out *stream.Output[int64]) error {
				sum, _ := total.Value()
				sum += int64(amount)
				total.Update(sum)
				out.Emit(sum)
				return nil
			},
		}, nil
	}, stream.Parallelism(2))
	files, err := file.NewSink(filepath.Join(dir, "files"), func(dst []byte, sum int64) []byte { return strconv.AppendInt(dst, sum, 10) }, file.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stream.SinkTo(totals, "files", files)
	r, err := j.Start(context.Background(), stream.Options{CheckpointDir: filepath.Join(dir, "checkpoints"), CheckpointInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	onStart(r.Metrics())
	if err := r.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestCollectorServesTheJobsMetrics runs a job to its end, then scrapes a
// registry with the job's collector over HTTP and compares the series with
// the job's own counters.
func TestCollectorServesTheJobsMetrics(t *testing.T) {
	const events = 20_000
	var m *stream.Metrics
	runTotals(t, t.TempDir(), events, 100, func(got *stream.Metrics) { m = got })
	reg := prometheus.NewRegistry()
	col := metrics.NewCollector("totals", m)
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
		fmt.Sprintf(`exactly_checkpoints_completed_total{job_name="totals"} %d`, m.Completed.Load()),
		`exactly_checkpoints_aborted_total{job_name="totals"} 0`,
		`exactly_restarts_total{job_name="totals"} 0`,
		`exactly_checkpoints_skipped_corrupt_total{job_name="totals"} 0`,
		fmt.Sprintf(`exactly_checkpoint_last_id{job_name="totals"} %d`, last.ID),
		fmt.Sprintf(`exactly_checkpoint_duration_seconds_count{job_name="totals"} %d`, m.Completed.Load()),
		fmt.Sprintf(`exactly_checkpoint_duration_seconds_bucket{job_name="totals",le="+Inf"} %d`, m.Completed.Load()),
		fmt.Sprintf(`exactly_operator_records_total{job_name="totals",operator="orders"} %d`, events),
		fmt.Sprintf(`exactly_operator_records_total{job_name="totals",operator="running-totals"} %d`, events),
		fmt.Sprintf(`exactly_operator_records_out_total{job_name="totals",operator="orders"} %d`, events),
		fmt.Sprintf(`exactly_operator_records_out_total{job_name="totals",operator="running-totals"} %d`, events),
		`exactly_operator_records_out_total{job_name="totals",operator="files"} 0`,
		// The bounded input was read to its end: no lag is left.
		`exactly_source_lag{job_name="totals",source="orders",split="gen-0",subtask="0",unit="records"} 0`,
		`exactly_source_lag{job_name="totals",source="orders",split="gen-7",subtask="1",unit="records"} 0`,
	} {
		if !slices.Contains(lines, want) {
			t.Errorf("scrape lacks the line %q; got:\n%s", want, body)
		}
	}
	for _, gauge := range []string{"exactly_checkpoint_last_duration_seconds", "exactly_checkpoint_last_completion_timestamp_seconds", "exactly_checkpoint_last_size_bytes",
		`exactly_sink_commit_latency_seconds{job_name="totals",sink="files"`,
		`exactly_task_busy_seconds_total{job_name="totals",task="orders[1]"`,
		`exactly_task_backpressured_seconds_total{job_name="totals",task="running-totals[0]"`,
		`exactly_task_idle_seconds_total{job_name="totals",task="running-totals[1]"`} {
		if !strings.Contains(gauge, "{") {
			gauge += `{job_name="totals"`
		}
		if !slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, gauge+`} `) }) {
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
	var m stream.Metrics
	col := metrics.NewCollector("idle", &m)
	if n := testutil.CollectAndCount(col); n != 5 {
		t.Errorf("collected %d series, want the 4 job counters and the empty histogram", n)
	}
	if n := testutil.CollectAndCount(col, "exactly_checkpoint_last_id"); n != 0 {
		t.Errorf("exactly_checkpoint_last_id exported before any checkpoint")
	}
}

// TestLastCheckpointSurvivesARestart runs a job, then starts it again on
// the same checkpoints: from its start, the new run reports the checkpoint
// it restored, so an alert on the last completion's age does not go blind
// after a crash.
func TestLastCheckpointSurvivesARestart(t *testing.T) {
	dir := t.TempDir()
	var first *stream.Metrics
	runTotals(t, dir, 5_000, 10, func(m *stream.Metrics) { first = m })
	want := first.LastCheckpoint.Load()
	var atStart *stream.CheckpointStats
	runTotals(t, dir, 5_000, 10, func(m *stream.Metrics) { atStart = m.LastCheckpoint.Load() })
	if atStart == nil || atStart.ID != want.ID || atStart.StateBytes != want.StateBytes {
		t.Fatalf("at the restart's start the last checkpoint is %+v, want the restored %+v", atStart, want)
	}
}

// TestCollectorServesWatermarks: a running job with event time exports
// each task's last watermark (in Unix seconds of event time) and whether
// it is idle.
func TestCollectorServesWatermarks(t *testing.T) {
	r := testjob.Start(t)
	reg := prometheus.NewRegistry()
	reg.MustRegister(metrics.NewCollector(testjob.Name, r.Metrics()))
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	value := func(name, task string) (float64, bool) {
		for _, f := range families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "task" && l.GetValue() == task {
						return m.GetGauge().GetValue(), true
					}
				}
			}
		}
		return 0, false
	}
	from, to := float64(testjob.EventEpoch.Unix()), float64(testjob.EventEpoch.Add(24*time.Hour).Unix())
	for _, task := range []string{"numbers[0]", "count[0]"} {
		wm, ok := value("exactly_task_watermark_seconds", task)
		if !ok || wm < from || wm > to {
			t.Errorf("exactly_task_watermark_seconds{task=%q} = %v (present %t); want the event time of the numbers read, on %s", task, wm, ok, testjob.EventEpoch.Format(time.DateOnly))
		}
		if idle, ok := value("exactly_task_event_time_idle", task); !ok || idle != 0 {
			t.Errorf("exactly_task_event_time_idle{task=%q} = %v (present %t); want 0", task, idle, ok)
		}
	}
}
