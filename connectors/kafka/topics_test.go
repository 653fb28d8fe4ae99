package kafka_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestEnsureTopicFromManyInstances ensures one new topic from several
// callers at once, as the instances of a cluster job do with its
// repartition topics when they start together: every caller succeeds,
// also those that find the topic created a moment ago by another, whose
// metadata the brokers may not list yet (a failure of the test command,
// "topic … does not exist or is not readable", before awaitTopic also
// waited for a topic another caller created).
func TestEnsureTopicFromManyInstances(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	conn := kafka.Conn{Brokers: []string{brokers}}
	const rounds, callers = 5, 4
	for range rounds {
		topic := kafkatest.UniqueName("ensure")
		t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topic) })
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Go(func() { errs[i] = kafka.EnsureTopic(context.Background(), conn, topic, 3) })
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("caller %d of %d ensuring new topic %s: %v", i+1, callers, topic, err)
			}
		}
		got, err := kafka.TopicPartitions(context.Background(), conn, []string{topic})
		if err != nil || got[topic] != 3 {
			t.Fatalf("topic %s after ensuring it: %v partitions, %v; want 3", topic, got[topic], err)
		}
	}
}

// TestEnsureTopicRefusesACompactedTopic: a repartition topic that exists
// compacted would keep only the last record of each key, so the job's
// stages would lose records silently: it is refused, naming the setting
// and the fix. A topic EnsureTopic creates is not compacted.
func TestEnsureTopicRefusesACompactedTopic(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	conn := kafka.Conn{Brokers: []string{brokers}}
	ctx := context.Background()
	compacted := kafkatest.UniqueName("compacted")
	if _, err := adm.CreateTopic(ctx, 2, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, compacted); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), compacted) })
	err := kafka.EnsureTopic(ctx, conn, compacted, 2)
	want := `repartition topic "` + compacted + `" has cleanup.policy=compact, but compaction would keep only the last record of each key`
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--add-config cleanup.policy=delete") {
		t.Fatalf("EnsureTopic of a compacted topic: %v, want an error containing %q and the fix", err, want)
	}

	created := kafkatest.UniqueName("created")
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), created) })
	if err := kafka.EnsureTopic(ctx, conn, created, 2); err != nil {
		t.Fatal(err)
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, created)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(created, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && (c.Value == nil || *c.Value != "delete") {
			t.Errorf("a topic EnsureTopic created has cleanup.policy %v, want delete", c.Value)
		}
	}
	// Ensured again, as every instance's start does: accepted.
	if err := kafka.EnsureTopic(ctx, conn, created, 2); err != nil {
		t.Errorf("EnsureTopic of the topic it created: %v", err)
	}
}
