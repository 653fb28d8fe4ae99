package kafka

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TopicPartitions returns the number of partitions of each topic; a
// topic that does not exist is an error naming it. While the brokers
// cannot be reached, it tries again until ctx ends.
func TopicPartitions(ctx context.Context, conn Conn, topics []string) (map[string]int32, error) {
	var td kadm.TopicDetails
	err := untilReachable(ctx, func() (err error) {
		// Describe would do here, but the topics are a job's input, which
		// it reads: name the ACL it needs (Read implies Describe).
		td, err = listTopics(ctx, conn, topics, "the job's topics", "Read")
		return err
	})
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
// default replication factor) and the settings of a repartition topic
// (not compacted) unless it exists; a topic that
// exists with another partition count or compacted is refused with an
// error naming it, what was found and the fix. It is for the repartition topics of a job run in stages,
// whose count fixes which partition holds which keys. While the brokers
// cannot be reached, it tries again until ctx ends.
func EnsureTopic(ctx context.Context, conn Conn, topic string, partitions int32) error {
	return untilReachable(ctx, func() error { return ensureTopic(ctx, conn, topic, partitions) })
}

// ensureTopic is one try of EnsureTopic.
func ensureTopic(ctx context.Context, conn Conn, topic string, partitions int32) error {
	cl, err := conn.newClient(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	resp, err := adm.CreateTopic(ctx, partitions, -1, repartitionConfigs, topic)
	created := err == nil && resp.Err == nil
	if refused := conn.refused(errors.Join(err, resp.Err), "Create", "topic "+topic); refused != nil {
		return refused
	}
	switch {
	case created:
	case err == nil && !errors.Is(resp.Err, kerr.TopicAlreadyExists):
		return fmt.Errorf("kafka: creating topic %q: %w", topic, conn.explain(resp.Err))
	case err != nil && !errors.Is(err, kerr.TopicAlreadyExists):
		return fmt.Errorf("kafka: creating topic %q: %w", topic, conn.explain(err))
	}
	// Created here or by another instance a moment ago: either way the
	// brokers may answer before their metadata lists the topic.
	n, err := awaitTopic(ctx, adm, topic, created)
	if err != nil {
		return err
	}
	if n != partitions {
		return fmt.Errorf("kafka: topic %q exists with %d partitions, but the job needs %d: its partitions hold the keys by their count, so it cannot change under a job; delete the topic if nothing of it is needed (see docs/scale-out.md, \"Repartition topics\"), or set the job's count of repartition partitions to %d", topic, n, partitions, n)
	}
	return checkRepartitionConfigs(ctx, adm, conn, topic)
}

// repartitionConfigs are the settings a repartition topic is created
// with: never compacted, which would keep only the last record of each key.
// Its records are deleted by the topic's retention (the broker's default,
// log.retention.hours, 7 days unless changed): a stage stopped longer than
// that finds its position gone and stops with an error. Deleting records
// once the reading stage has checkpointed past them, as Kafka Streams does
// with infinite retention, is not done: a restored upstream sink reads its
// transactions' records back to learn their outcome (docs/scale-out.md,
// "Repartition topics").
var repartitionConfigs = map[string]*string{"cleanup.policy": kadm.StringPtr("delete")}

// checkRepartitionConfigs refuses a repartition topic that is compacted,
// naming the setting, its value and the fix.
func checkRepartitionConfigs(ctx context.Context, adm *kadm.Client, conn Conn, topic string) error {
	var rc kadm.ResourceConfig
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		if rc, err = rcs.On(topic, nil); err == nil {
			err = rc.Err
		}
	}
	if refused := conn.refused(err, "DescribeConfigs", "topic "+topic); refused != nil {
		return refused
	}
	if err != nil {
		return fmt.Errorf("kafka: reading the settings of topic %q: %w", topic, conn.explain(err))
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil && strings.Contains(*c.Value, "compact") {
			return fmt.Errorf("kafka: repartition topic %q has cleanup.policy=%s, but compaction would keep only the last record of each key of a job run in stages: "+
				"set cleanup.policy=delete (kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=delete) on an empty topic, or delete the topic if nothing of it is needed (docs/scale-out.md, \"Repartition topics\")",
				topic, *c.Value, topic)
		}
	}
	return nil
}

// awaitTopic waits until the metadata lists topic — with a leader for
// every partition when leaders is set (a topic just created, which its
// writers are about to use) — and returns its partition count: the
// brokers answer a creation before their metadata has the topic, so a
// client asking at once (this one, or another instance that found the
// topic already created) is told it does not exist. A topic that existed
// before needs no leaders here: a partition whose broker is down makes
// only its own tasks wait, as before.
func awaitTopic(ctx context.Context, adm *kadm.Client, topic string, leaders bool) (int32, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var last error
	for {
		md, err := adm.Metadata(ctx, topic)
		td, ok := md.Topics[topic]
		switch {
		case err != nil:
			last = err
		case !ok:
			last = errors.New("not in the metadata")
		case td.Err != nil:
			last = td.Err
		case len(td.Partitions) == 0:
			last = errors.New("no partitions in the metadata")
		default:
			last = nil
			for _, p := range td.Partitions {
				if leaders && (p.Err != nil || p.Leader < 0) {
					last = fmt.Errorf("partition %d has no leader", p.Partition)
				}
			}
			if last == nil {
				return int32(len(td.Partitions)), nil
			}
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("kafka: topic %q exists, but the brokers' metadata does not list it whole after 30s (%v): check the brokers", topic, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
