package kafka_test

import (
	"context"
	"sync"
	"testing"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestEnsureTopicFromManyInstances ensures one new topic from several
// callers at once, as the instances of a cluster job do with its
// repartition topics when they start together: every caller succeeds,
// also those that find the topic created a moment ago by another, whose
// metadata the brokers may not list yet (a failure of the test command,
// "topic … does not exist or is not readable", before awaitLeaders also
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
