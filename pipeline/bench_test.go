package pipeline

import (
	"context"
	"io"
	"log/slog"
	"testing"
)

// benchPipeline generates 200,000 records and filters, maps and writes
// them to files; benchWindowPipeline aggregates them per key and window
// instead.
const (
	benchSource = `
source:
  kind: generator
  count: 200000
  fields: {customer: '"c" + string(index % 100)', amount: index % 10, ts: index}
event_time: {field: ts}
`
	benchPipeline = "name: bench-map" + benchSource + `
transforms:
  - filter: amount > 0
  - map: {customer: customer, cents: amount * 100, big: amount > 5}
sink: {kind: file, dir: out}
`
	benchWindowPipeline = "name: bench-window" + benchSource + `
transforms:
  - key_by: customer
  - aggregate:
      window: {kind: tumbling, size: 1s}
      values: {n: count(), total: sum(amount)}
sink: {kind: file, dir: out}
`
)

// BenchmarkRun measures records per second through a pipeline: expr
// evaluation, the record maps, the engine and the file sink.
func BenchmarkRun(b *testing.B) {
	for _, bc := range []struct{ name, src string }{{"filter-map", benchPipeline}, {"window", benchWindowPipeline}} {
		b.Run(bc.name, func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				b.Chdir(b.TempDir())
				p, err := Parse("bench.yaml", []byte(bc.src), env)
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if err := p.Run(context.Background(), RunOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(200000*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
