package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/bench/nexmark"
)

// partitions is the number of partitions of every topic the benchmark makes.
const partitions = 4

// broker wraps the clients the runner uses to set up and observe a run.
type broker struct {
	seeds   []string
	cl      *kgo.Client
	adm     *kadm.Client
	created []string // the topics createTopics made
}

// dial connects to the cluster at seeds.
func dial(seeds []string) (*broker, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, err
	}
	return &broker{seeds: seeds, cl: cl, adm: kadm.NewClient(cl)}, nil
}

// close closes the runner's client.
func (b *broker) close() { b.cl.Close() }

// createTopics creates topics with `partitions` partitions and the topic
// configs (nil: the broker's defaults).
func (b *broker) createTopics(ctx context.Context, configs map[string]*string, topics ...string) error {
	resp, err := b.adm.CreateTopics(ctx, partitions, 1, configs, topics...)
	if err != nil {
		return err
	}
	b.created = append(b.created, topics...)
	return resp.Error()
}

// deleteCreated deletes the topics createTopics made: a run of 10 M events
// leaves gigabytes, and the windowed outputs are never deleted by time.
func (b *broker) deleteCreated(ctx context.Context) error {
	resp, err := b.adm.DeleteTopics(ctx, b.created...)
	if err != nil {
		return err
	}
	return resp.Error()
}

// committedEnds returns the last stable offset of each partition of topic.
func (b *broker) committedEnds(ctx context.Context, topic string) ([partitions]int64, error) {
	var ends [partitions]int64
	offs, err := b.adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return ends, err
	}
	if err := offs.Error(); err != nil {
		return ends, err
	}
	offs.Each(func(o kadm.ListedOffset) {
		if o.Partition >= 0 && o.Partition < partitions {
			ends[o.Partition] = o.Offset
		}
	})
	return ends, nil
}

// producer returns a client producing to topic without lingering.
func (b *broker) producer(topic string) (*kgo.Client, error) {
	return kgo.NewClient(kgo.SeedBrokers(b.seeds...), kgo.DefaultProduceTopic(topic),
		kgo.ProducerLinger(0), kgo.ProducerBatchCompression(kgo.NoCompression()))
}

// load writes events [0, n) of the stream seeded by seed to topic, once.
func (b *broker) load(ctx context.Context, topic string, seed, n uint64) error {
	cl, err := b.producer(topic)
	if err != nil {
		return err
	}
	defer cl.Close()
	const chunk = 20_000
	recs := make([]*kgo.Record, 0, chunk)
	for i := uint64(0); i < n; i++ {
		recs = append(recs, &kgo.Record{Value: nexmark.Append(nil, seed, i)})
		if len(recs) == chunk || i == n-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				return err
			}
			recs = recs[:0]
		}
	}
	return nil
}

// seen is what a read_committed consumer saw of one output record.
type seen struct {
	at        time.Time // when the consumer received it
	input     time.Time // its timestamp: the input record's
	partition int32
	offset    int64
}

// consume reads topic from the start with read_committed and passes each
// record, its key and its value to fn until ctx ends. They are valid only
// during the call.
func (b *broker) consume(ctx context.Context, topic string, fn func(r seen, key, value []byte)) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.seeds...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(10*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	for ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.Canceled) {
				return fmt.Errorf("consuming %s: %w", topic, e.Err)
			}
		}
		now := time.Now()
		fs.EachRecord(func(r *kgo.Record) {
			fn(seen{at: now, input: r.Timestamp, partition: r.Partition, offset: r.Offset}, r.Key, r.Value)
		})
	}
	return nil
}
