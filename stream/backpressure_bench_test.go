package stream_test

import (
	"context"
	"flag"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/stream"
)

var benchBackpressureRecords = flag.Int("bench.backpressure-records", 20_000, "records per BenchmarkBackpressure run, times the records per sleep")

// BenchmarkBackpressure measures how long checkpoints take behind a slow
// operator: a source of two subtasks reads as fast as it can into one
// subtask that sleeps 1 ms after every n records (a slow sink's rate;
// this machine's sleeps last about 1.1 ms), checkpoints every 200 ms,
// without and with buffer debloating (Options.DebloatTarget). It reports
// the checkpoints' durations, from the barrier's injection to the
// metadata written (p50, max), and the records per second through the
// slow subtask.
func BenchmarkBackpressure(b *testing.B) {
	for _, every := range []int{1, 4, 16} {
		for _, target := range []time.Duration{0, 200 * time.Millisecond, 50 * time.Millisecond} {
			name := fmt.Sprintf("sleep-every=%d/debloat=%v", every, target)
			if target == 0 {
				name = fmt.Sprintf("sleep-every=%d/debloat=off", every)
			}
			b.Run(name, func(b *testing.B) {
				for range b.N {
					durations, perSecond := backpressureRun(b, every, target)
					slices.Sort(durations)
					if len(durations) == 0 {
						b.Fatal("no checkpoint completed")
					}
					b.ReportMetric(float64(len(durations)), "checkpoints")
					b.ReportMetric(float64(durations[len(durations)/2].Milliseconds()), "p50-ms")
					b.ReportMetric(float64(durations[len(durations)-1].Milliseconds()), "max-ms")
					b.ReportMetric(perSecond, "records/s")
				}
			})
		}
	}
}

// backpressureRun runs the job once and returns its checkpoints'
// durations and its records per second.
func backpressureRun(b *testing.B, every int, target time.Duration) ([]time.Duration, float64) {
	var mu sync.Mutex
	injected := map[checkpoint.ID]time.Time{}
	var durations []time.Duration
	probe := func(p stream.ProbePoint, id checkpoint.ID) {
		mu.Lock()
		defer mu.Unlock()
		switch p {
		case stream.ProbeBarrierInjected:
			if _, ok := injected[id]; !ok {
				injected[id] = time.Now()
			}
		case stream.ProbeMetadataWritten:
			durations = append(durations, time.Since(injected[id]))
		}
	}
	records := *benchBackpressureRecords * every
	j := stream.New("backpressure-bench")
	// Reads of up to 512 records, as a Kafka source's polls of a backlog.
	in := stream.Source(j, "numbers", counting{n: records, splits: 2, batch: 512}, stream.Parallelism(2))
	slow := stream.Map(in, func(v int) int {
		if v%every == 0 {
			time.Sleep(time.Millisecond)
		}
		return v
	}, stream.Name("slow"), stream.Parallelism(1))
	stream.SinkTo(slow, "out", newMemSink[int](), stream.Parallelism(1))
	start := time.Now()
	err := j.Run(context.Background(), stream.Options{CheckpointDir: b.TempDir(), CheckpointInterval: 200 * time.Millisecond,
		DebloatTarget: target, Probe: probe})
	if err != nil {
		b.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return durations, float64(records) / time.Since(start).Seconds()
}
