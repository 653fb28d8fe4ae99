package kafka_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
)

// TestAbortedCommitBehindAnotherOpenTransaction: a prepared transaction
// that was aborted (its epoch bumped by another InitProducerID) while an
// older transaction of another producer stays open in the same partition
// is recognised as aborted at once. The partition's last stable offset,
// which the open transaction holds back, says nothing about it: a check
// on it alone answered "not decided in the log yet; retrying" until the
// other transaction ended (seen in the 529-fault torture run of seed
// 20261211, where it lasted until the transaction timeout).
func TestAbortedCommitBehindAnotherOpenTransaction(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic, prefix := kafkatest.UniqueName("behind"), kafkatest.UniqueName("behind-txn")
	kafkatest.CreateTopic(t, adm, topic, 1)
	ctx := context.Background()

	// Another producer's transaction, open before ours, holds the LSO.
	holder, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.TransactionalID(kafkatest.UniqueName("holder")), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := holder.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := holder.ProduceSync(ctx, &kgo.Record{Value: []byte("holder")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	defer holder.EndTransaction(ctx, kgo.TryAbort)

	s := bytesSink(t, brokers, topic, prefix)
	cm := prepare(t, s, 0, 1, "ours")
	// Someone bumps the epoch of our transactional id: the coordinator
	// aborts our prepared transaction.
	ids := knownTransactionalIDs(t, adm, prefix)
	if len(ids) == 0 {
		t.Fatal("no transactional id of the sink")
	}
	for _, id := range ids {
		fencer, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.TransactionalID(id))
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := fencer.ProducerID(ctx); err != nil {
			t.Fatal(err)
		}
		fencer.Close()
	}

	c, err := s.NewCommitter(ctx, sink.CommitterInfo{Job: "t", Sink: "out"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = c.Commit(cctx, cm)
	if err == nil {
		t.Fatal("the aborted transaction committed")
	}
	if strings.Contains(err.Error(), "not decided in the log yet") {
		t.Fatalf("Commit = %v: the aborted transaction was taken for an undecided one", err)
	}
	if !sink.IsPermanent(err) && !errors.Is(err, sink.ErrFenced) {
		t.Fatalf("Commit = %v, want a permanent or fenced error saying the transaction was aborted", err)
	}
	if !strings.Contains(err.Error(), "aborted") {
		t.Fatalf("Commit = %v, want it to say the transaction was aborted", err)
	}
}

// TestOutcomeFarBehindTheRecords: a transaction's marker that others'
// records put many fetches behind the transaction's own is still found,
// both an abort marker (a new producer fenced the id after another
// producer wrote) and a commit marker (the re-commit of a committed
// transaction, as after a SIGKILL right after the commit). The scan was
// bounded by 256 fetches of 1 MiB: on a partition written at more than
// about 25 MB/s the outcome could not be read, and the commit was retried
// forever. Here fetches are 4 KiB and the others' records 2 MiB.
func TestOutcomeFarBehindTheRecords(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	defer kafka.SetOutcomeFetchBytes(4 << 10)()
	adm := kafkatest.Admin(t, brokers)
	ctx := context.Background()
	other, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	writeOthers := func(topic string) {
		t.Helper()
		var rs []*kgo.Record
		for range 2048 {
			rs = append(rs, &kgo.Record{Topic: topic, Value: make([]byte, 1<<10)})
		}
		if err := other.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("aborted", func(t *testing.T) {
		topic, prefix := kafkatest.UniqueName("far-abort"), kafkatest.UniqueName("far-abort-txn")
		kafkatest.CreateTopic(t, adm, topic, 1)
		s := bytesSink(t, brokers, topic, prefix)
		cm := prepare(t, s, 0, 1, "ours-1", "ours-2")
		writeOthers(topic)
		for _, id := range knownTransactionalIDs(t, adm, prefix) {
			fencer, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.TransactionalID(id))
			if err != nil {
				t.Fatal(err)
			}
			if _, _, err := fencer.ProducerID(ctx); err != nil {
				t.Fatal(err)
			}
			fencer.Close()
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err := committer(t, s).Commit(cctx, cm)
		if err == nil || !strings.Contains(err.Error(), "aborted") || !sink.IsPermanent(err) && !errors.Is(err, sink.ErrFenced) {
			t.Fatalf("Commit = %v, want a permanent or fenced error saying the transaction was aborted", err)
		}
	})

	t.Run("committed", func(t *testing.T) {
		topic, prefix := kafkatest.UniqueName("far-commit"), kafkatest.UniqueName("far-commit-txn")
		kafkatest.CreateTopic(t, adm, topic, 1)
		s := bytesSink(t, brokers, topic, prefix)
		cm := prepare(t, s, 0, 1, "ours-1", "ours-2")
		writeOthers(topic)
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		if err := committer(t, s).Commit(cctx, cm); err != nil {
			t.Fatal(err)
		}
		if err := committer(t, s).Commit(cctx, cm); err != nil {
			t.Fatalf("re-commit of the committed transaction, its marker 2 MiB behind its records: %v", err)
		}
	})
}
