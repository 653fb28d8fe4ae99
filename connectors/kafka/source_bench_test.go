package kafka

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fetched returns n records laid out as franz-go decodes a fetch: one
// []kgo.Record per batch, keys and values slicing one shared buffer.
func fetched(n, valueSize, headers int) []*kgo.Record {
	buf := make([]byte, n*(valueSize+8))
	recs := make([]kgo.Record, n)
	ptrs := make([]*kgo.Record, n)
	now := time.Now()
	for i := range recs {
		b := buf[i*(valueSize+8):]
		r := &recs[i]
		r.Topic, r.Partition, r.Offset, r.Timestamp = "events", 3, int64(i), now
		r.Key, r.Value = b[:8:8], b[8:8+valueSize:8+valueSize]
		for h := range headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: "h", Value: b[h : h+1]})
		}
		ptrs[i] = r
	}
	return ptrs
}

// benchRead measures reader.Read turning polled franz-go records into
// Record[V], batchSize records per Read, as the engine calls it. No broker:
// the records are queued as a poll would leave them.
func benchRead[V any](b *testing.B, decode Deserializer[V], valueSize, headers int) {
	const batchSize = 512
	recs := fetched(batchSize, valueSize, headers)
	r := &reader[V]{s: &Source[V]{decode: decode}, split: "events/3", end: -1}
	out := make([]Record[V], batchSize)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r.queued = recs
		if n, err := r.Read(ctx, out); n != batchSize || err != nil {
			b.Fatalf("read %d, %v", n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batchSize), "ns/record")
}

// BenchmarkRead measures the source's per-record conversion.
//
//	go test -run '^$' -bench BenchmarkRead ./connectors/kafka/
func BenchmarkRead(b *testing.B) {
	b.Run("bytes-100B", func(b *testing.B) { benchRead(b, Bytes(), 100, 0) })
	b.Run("bytes-100B-2headers", func(b *testing.B) { benchRead(b, Bytes(), 100, 2) })
	b.Run("string-100B", func(b *testing.B) { benchRead(b, String(), 100, 0) })
}
