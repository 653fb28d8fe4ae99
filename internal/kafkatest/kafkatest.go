// Package kafkatest holds the helpers that tests against the real Kafka
// broker share: an admin client, unique names, topics that are created
// with a leader per partition and deleted afterwards, and a read_committed
// reader of a topic.
package kafkatest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Admin returns an admin client of the broker, closed when the test ends.
func Admin(t testing.TB, brokers string) *kadm.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// UniqueName returns a name not used by earlier runs.
func UniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d-%04d", prefix, time.Now().UnixNano(), rand.IntN(10000))
}

// CreateTopic creates a topic with partitions partitions, waits until the
// metadata lists a leader for each, and deletes it when the test ends.
func CreateTopic(t testing.TB, adm *kadm.Client, name string, partitions int32) {
	t.Helper()
	resp, err := adm.CreateTopic(context.Background(), partitions, 1, nil, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", name, err)
	}
	// The broker answers CreateTopics before its metadata lists every
	// partition with a leader: a client asking at once can be told the
	// topic does not exist (seen in CI: TestLegacyPrefixUpgrade).
	waitForPartitions(t, adm, name, partitions)
	t.Cleanup(func() {
		if _, err := adm.DeleteTopics(context.Background(), name); err != nil {
			t.Logf("delete topic %s: %v", name, err)
		}
	})
}

// AddPartitions grows topic to partitions partitions and waits until the
// metadata lists a leader for each. A producer opened before the broker's
// metadata shows the new partitions refuses records for them ("invalid
// record partitioning choice", seen in CI: TestPartitionsDiscoveredWhileRunning).
func AddPartitions(t testing.TB, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	td, err := adm.ListTopics(context.Background(), topic)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		t.Fatalf("list topic %s: %v", topic, err)
	}
	resp, err := adm.CreatePartitions(context.Background(), int(partitions)-len(td[topic].Partitions), topic)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		t.Fatalf("add partitions to %s: %v", topic, err)
	}
	waitForPartitions(t, adm, topic, partitions)
}

// waitForPartitions waits until the metadata lists topic with partitions
// partitions, each with a leader.
func waitForPartitions(t testing.TB, adm *kadm.Client, topic string, partitions int32) {
	t.Helper()
	WaitFor(t, 30*time.Second, fmt.Sprintf("topic %s in the metadata with %d partitions, each with a leader", topic, partitions), func() bool {
		md, err := adm.Metadata(context.Background(), topic)
		td, ok := md.Topics[topic]
		if err != nil || !ok || td.Err != nil || len(td.Partitions) != int(partitions) {
			return false
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 {
				return false
			}
		}
		return true
	})
}

// WaitFor polls cond until it holds, failing the test after timeout with
// what it waited for. The broker's state has no change notification, so
// polling it is the deterministic wait.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(timeout); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waited %v for %s", timeout, what)
		}
	}
}

// ReadCommitted reads topic from the start with read_committed isolation
// until want records arrived and nothing more came for a second, or
// timeout passed.
func ReadCommitted(t testing.TB, brokers, topic string, want int, timeout time.Duration) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	deadline := time.Now().Add(timeout)
	idleSince := time.Now()
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		n := len(out)
		out = append(out, fs.Records()...)
		if len(out) > n {
			idleSince = time.Now()
		}
		if len(out) >= want && time.Since(idleSince) > time.Second {
			break
		}
	}
	return out
}

// DeleteRepartitionTopicsAtEnd deletes, when the test ends, the
// repartition topics a job called job run on a cluster created:
// "<job>-…-repartition" (cluster.RunJob names them so).
func DeleteRepartitionTopicsAtEnd(t testing.TB, adm *kadm.Client, job string) {
	t.Cleanup(func() {
		td, err := adm.ListTopics(context.Background())
		if err != nil {
			t.Logf("list topics: %v", err)
			return
		}
		for _, topic := range td.Names() {
			if strings.HasPrefix(topic, job+"-") && strings.HasSuffix(topic, "-repartition") {
				if _, err := adm.DeleteTopics(context.Background(), topic); err != nil {
					t.Logf("delete topic %s: %v", topic, err)
				}
			}
		}
	})
}
