// Package metrics exports a running job's metrics to Prometheus.
//
// A [Collector] reads a job's [stream.Metrics] (atomic counters the engine
// keeps anyway) when it is scraped, so exporting adds nothing to the work
// per record. Register it and serve the registry:
//
//	r, _ := job.Start(ctx, opts)
//	reg := prometheus.NewRegistry()
//	reg.MustRegister(metrics.NewCollector("orders", r.Metrics()))
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// The series, each labelled job_name with the job's name (not job: a
// Prometheus server sets job to the scrape job's name) and, where per
// operator, operator:
//
//	exactly_checkpoints_completed_total            checkpoints and savepoints completed
//	exactly_checkpoints_aborted_total              checkpoints aborted or interrupted
//	exactly_checkpoint_last_id                     id of the last completed checkpoint
//	exactly_checkpoint_last_duration_seconds       its trigger to metadata written
//	exactly_checkpoint_last_completion_timestamp_seconds
//	                                               when it completed (alert on time() minus this)
//	exactly_checkpoint_last_size_bytes             its state files' size
//	exactly_checkpoint_duration_seconds            histogram of the checkpoints completed in this process
//	exactly_restarts_total                         restarts after failures inside the process
//	exactly_operator_records_total{operator}       records an operator handled, replays included
//	exactly_operator_records_out_total{operator}   records an operator emitted on all its outputs
//	exactly_operator_late_records_total{operator}  records too late for the windows (dropped or side output)
//	exactly_task_busy_seconds_total{task}          a task's time working (task: "head[subtask]" of its chain)
//	exactly_task_backpressured_seconds_total{task} its time waiting for room in a full channel to a consumer
//	exactly_task_idle_seconds_total{task}          its time waiting for input
//	exactly_task_watermark_seconds{task}           the last watermark it passed on, Unix seconds of event time
//	                                               (absent before the first and after its input ended)
//	exactly_task_event_time_idle{task}             1 while it announced itself idle (holds no event time back)
//	exactly_sink_commit_latency_seconds{sink}      from the completion of the newest checkpoint the sink
//	                                               committed to the last of its subtasks' commits
//	exactly_source_lag{source,subtask,split,unit}  input of a split not read yet, for sources that tell it
//
// Counters count from the process's start: after a crash and restart from a
// checkpoint they begin again at 0, which Prometheus treats as a counter
// reset. The checkpoint gauges describe the job's last completed
// checkpoint: after a restart, the restored one until the process
// completes its own.
package metrics

import (
	"net/http"
	"strconv"

	"github.com/exactlyonce/exactly/stream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/exactlyonce/exactly/internal/runtime"
)

// Handler returns a handler that serves the metrics of the job named job
// to Prometheus, with the process collector's series beside them. Its
// signature is that of stream.ControlOptions.Metrics, so that a job's
// control server serves GET /metrics:
//
//	opts.Control = stream.ControlOptions{Addr: "127.0.0.1:8081", Metrics: metrics.Handler}
func Handler(job string, m *stream.Metrics) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), NewCollector(job, m))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// Collector is a prometheus.Collector of one job's metrics.
type Collector struct {
	m                                              *stream.Metrics
	completed, aborted, restarts, skipped          *prometheus.Desc
	lastID, lastDuration, lastCompletion, lastSize *prometheus.Desc
	durations                                      *prometheus.Desc
	records, late, recordsOut                      *prometheus.Desc
	busy, backpressured, idle                      *prometheus.Desc
	watermark, eventTimeIdle                       *prometheus.Desc
	commitLatency, lag                             *prometheus.Desc
}

// NewCollector returns a collector of m, the metrics of the job named job
// (the value of every series' job_name label).
func NewCollector(job string, m *stream.Metrics) *Collector {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("exactly_"+name, help, labels, prometheus.Labels{"job_name": job})
	}
	return &Collector{
		m:              m,
		completed:      desc("checkpoints_completed_total", "Checkpoints and savepoints completed."),
		aborted:        desc("checkpoints_aborted_total", "Checkpoints aborted (timed out, declined by a subtask, no id reserved) or interrupted by a restart or a stop."),
		restarts:       desc("restarts_total", "Restarts of the job after a failure, inside this process."),
		skipped:        desc("checkpoints_skipped_corrupt_total", "Completed checkpoints skipped at restore because they did not verify (only with SkipCorruptCheckpoints); their committed output is written again."),
		lastID:         desc("checkpoint_last_id", "Id of the last completed checkpoint."),
		lastDuration:   desc("checkpoint_last_duration_seconds", "Time from the trigger of the last completed checkpoint to its metadata written."),
		lastCompletion: desc("checkpoint_last_completion_timestamp_seconds", "Unix time at which the last checkpoint completed."),
		lastSize:       desc("checkpoint_last_size_bytes", "Size of the state files of the last completed checkpoint."),
		durations:      desc("checkpoint_duration_seconds", "Time from trigger to metadata written of the checkpoints completed in this process."),
		records:        desc("operator_records_total", "Records an operator handled, over its subtasks; records replayed after a restart count again.", "operator"),
		late:           desc("operator_late_records_total", "Records an event-time operator found too late, behind the watermark: dropped or sent to a side output.", "operator"),
		recordsOut:     desc("operator_records_out_total", "Records an operator emitted on all its outputs, over its subtasks.", "operator"),
		busy:           desc("task_busy_seconds_total", "Time a task (the head operator of its chain and its subtask) spent working: records, barriers, timers.", "task"),
		backpressured:  desc("task_backpressured_seconds_total", "Time a task spent waiting for room in a full channel to a consumer.", "task"),
		idle:           desc("task_idle_seconds_total", "Time a task spent waiting for input.", "task"),
		watermark:      desc("task_watermark_seconds", "The last watermark a task passed on, in Unix seconds of event time; time() minus it is how far event time lags.", "task"),
		eventTimeIdle:  desc("task_event_time_idle", "1 while a task announced that it holds no event time back (idle source splits, idle inputs), else 0.", "task"),
		commitLatency:  desc("sink_commit_latency_seconds", "Time from the completion of the newest checkpoint a sink committed to the last of its subtasks' commits returning.", "sink"),
		lag:            desc("source_lag", "Input of a source split not read yet, in the unit of the unit label.", "source", "subtask", "split", "unit"),
	}
}

// Describe sends the descriptors of every series c collects.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.completed, c.aborted, c.restarts, c.skipped, c.lastID, c.lastDuration, c.lastCompletion, c.lastSize, c.durations, c.records, c.late,
		c.recordsOut, c.busy, c.backpressured, c.idle, c.watermark, c.eventTimeIdle, c.commitLatency, c.lag} {
		ch <- d
	}
}

// Collect sends the current values. The checkpoint gauges are left out
// while the job has no completed checkpoint.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	m := c.m
	ch <- prometheus.MustNewConstMetric(c.completed, prometheus.CounterValue, float64(m.Completed.Load()))
	ch <- prometheus.MustNewConstMetric(c.aborted, prometheus.CounterValue, float64(m.Aborted.Load()))
	ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(m.Restarts.Load()))
	ch <- prometheus.MustNewConstMetric(c.skipped, prometheus.CounterValue, float64(m.SkippedCheckpoints()))
	if last := m.LastCheckpoint.Load(); last != nil {
		ch <- prometheus.MustNewConstMetric(c.lastID, prometheus.GaugeValue, float64(last.ID))
		ch <- prometheus.MustNewConstMetric(c.lastDuration, prometheus.GaugeValue, last.Completed.Sub(last.Triggered).Seconds())
		ch <- prometheus.MustNewConstMetric(c.lastCompletion, prometheus.GaugeValue, float64(last.Completed.UnixNano())/1e9)
		ch <- prometheus.MustNewConstMetric(c.lastSize, prometheus.GaugeValue, float64(last.StateBytes))
	}
	cumulative, count, sum := m.CheckpointDurations.Snapshot()
	buckets := make(map[float64]uint64, len(cumulative))
	for i, n := range cumulative {
		buckets[runtime.CheckpointDurationBuckets[i].Seconds()] = n
	}
	ch <- prometheus.MustNewConstHistogram(c.durations, count, sum.Seconds(), buckets)
	for op, n := range m.RecordsByOperator() {
		ch <- prometheus.MustNewConstMetric(c.records, prometheus.CounterValue, float64(n), op)
	}
	for op, n := range m.LateRecordsByOperator() {
		ch <- prometheus.MustNewConstMetric(c.late, prometheus.CounterValue, float64(n), op)
	}
	for op, n := range m.RecordsOutByOperator() {
		ch <- prometheus.MustNewConstMetric(c.recordsOut, prometheus.CounterValue, float64(n), op)
	}
	for task, e := range m.EventTimes() {
		if e.Watermark != runtime.MinWatermark && e.Watermark != runtime.MaxWatermark {
			ch <- prometheus.MustNewConstMetric(c.watermark, prometheus.GaugeValue, float64(e.Watermark)/1e9, task)
		}
		idle := 0.0
		if e.Idle {
			idle = 1
		}
		ch <- prometheus.MustNewConstMetric(c.eventTimeIdle, prometheus.GaugeValue, idle, task)
	}
	for task, t := range m.TaskTimes() {
		ch <- prometheus.MustNewConstMetric(c.busy, prometheus.CounterValue, t.Busy.Seconds(), task)
		ch <- prometheus.MustNewConstMetric(c.backpressured, prometheus.CounterValue, t.Backpressured.Seconds(), task)
		ch <- prometheus.MustNewConstMetric(c.idle, prometheus.CounterValue, t.Idle.Seconds(), task)
	}
	for sink, d := range m.CommitLatencies() {
		ch <- prometheus.MustNewConstMetric(c.commitLatency, prometheus.GaugeValue, d.Seconds(), sink)
	}
	for _, l := range m.SourceLag() {
		ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(l.Lag), l.Source, strconv.Itoa(l.Subtask), l.Split, l.Unit)
	}
}
