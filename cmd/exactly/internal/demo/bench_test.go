package demo

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"
)

// BenchmarkDemoJob runs the demo topology (generator → keyed running totals
// → sinks) over b.N orders with parallelism 2 and 1s checkpoints, with the
// sink that discards (the engine alone) and with the exactly-once SQLite and
// file sinks. It reports orders per second.
func BenchmarkDemoJob(b *testing.B) {
	for _, bc := range []struct {
		name    string
		discard bool
	}{{"engine-only", true}, {"sqlite+files", false}} {
		b.Run(bc.name, func(b *testing.B) {
			c := Config{
				Dir: b.TempDir(), Events: uint64(max(b.N, 1)), Customers: 10_000, Seed: 1,
				Parallelism: 2, CheckpointInterval: time.Second, Discard: bc.discard,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			}
			b.ResetTimer()
			start := time.Now()
			if err := Run(context.Background(), c, nil); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(c.Events)/time.Since(start).Seconds(), "orders/s")
		})
	}
}
