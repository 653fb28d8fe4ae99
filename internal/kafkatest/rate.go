package kafkatest

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceAtRate writes total records to topic at rate records per second,
// in rounds of rate/100 every 10 ms, each record made by record(i) when it
// is sent (a latency benchmark stamps it with the time), then flushes. It
// gives up when ctx ends or the client cannot be made; the benchmark that
// waits for the records sees they are missing.
func ProduceAtRate(ctx context.Context, brokers, topic string, rate, total int, record func(i int) *kgo.Record) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(0))
	if err != nil {
		return
	}
	defer cl.Close()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for sent := 0; sent < total; {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for range rate / 100 {
			cl.Produce(ctx, record(sent), nil)
			sent++
		}
	}
	_ = cl.Flush(ctx)
}
