package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TopicPartitions returns the number of partitions of each topic; a
// topic that does not exist is an error naming it.
func TopicPartitions(ctx context.Context, conn Conn, topics []string) (map[string]int32, error) {
	td, err := listTopics(ctx, conn, topics, "the job's topics")
	if err != nil {
		return nil, err
	}
	out := make(map[string]int32, len(topics))
	for _, t := range topics {
		out[t] = int32(len(td[t].Partitions))
	}
	return out, nil
}

// EnsureTopic creates topic with partitions partitions (the brokers'
// default replication factor) unless it exists; a topic that exists with
// another partition count is refused with an error naming it, both counts
// and the fix. It is for the repartition topics of a job run in stages,
// whose count fixes which partition holds which keys.
func EnsureTopic(ctx context.Context, conn Conn, topic string, partitions int32) error {
	cl, err := conn.newClient(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, -1, nil, topic)
	switch {
	case err == nil && resp.Err == nil:
		return awaitLeaders(ctx, adm, topic, partitions)
	case err == nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists):
		return fmt.Errorf("kafka: creating topic %q: %w", topic, conn.explain(resp.Err))
	case err != nil && !errors.Is(err, kerr.TopicAlreadyExists):
		return fmt.Errorf("kafka: creating topic %q: %w", topic, conn.explain(err))
	}
	td, err := listTopics(ctx, conn, []string{topic}, "the repartition topic")
	if err != nil {
		return err
	}
	if n := int32(len(td[topic].Partitions)); n != partitions {
		return fmt.Errorf("kafka: topic %q exists with %d partitions, but the job needs %d: its partitions hold the keys by their count, so it cannot change under a job; delete the topic if nothing of it is needed (see docs/scale-out.md, \"Repartition topics\"), or set the job's count of repartition partitions to %d", topic, n, partitions, n)
	}
	return nil
}

// awaitLeaders waits until the metadata lists every partition of a topic
// just created with a leader: the brokers answer the creation before, and
// a client asking at once is told the topic does not exist.
func awaitLeaders(ctx context.Context, adm *kadm.Client, topic string, partitions int32) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		md, err := adm.Metadata(ctx, topic)
		if td, ok := md.Topics[topic]; err == nil && ok && td.Err == nil && len(td.Partitions) == int(partitions) {
			ready := true
			for _, p := range td.Partitions {
				ready = ready && p.Err == nil && p.Leader >= 0
			}
			if ready {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kafka: topic %q was created, but its partitions have no leader after 30s: check the brokers", topic)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
