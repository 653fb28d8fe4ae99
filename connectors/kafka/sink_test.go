package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
)

// setTransactionVersion sets the cluster's transaction.version feature
// and returns the level it had.
func setTransactionVersion(t *testing.T, brokers string, level int16) int16 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	old := int16(0)
	for _, f := range av.FinalizedFeatures {
		if f.Name == "transaction.version" {
			old = f.MaxVersionLevel
		}
	}
	req := kmsg.NewPtrUpdateFeaturesRequest()
	u := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	u.Feature, u.MaxVersionLevel, u.UpgradeType = "transaction.version", level, 1
	if level < old {
		u.UpgradeType = 2 // safe downgrade
	}
	req.FeatureUpdates = append(req.FeatureUpdates, u)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.ErrorCode)
		for _, r := range resp.Results {
			if err == nil {
				err = kerr.ErrorForCode(r.ErrorCode)
			}
		}
	}
	if err != nil {
		t.Fatalf("set transaction.version to %d: %v", level, err)
	}
	// The broker publishes the new level a moment later: wait until it
	// answers ApiVersions with it, which is where clients learn it.
	kafkatest.WaitFor(t, 30*time.Second, fmt.Sprintf("the broker to publish transaction.version %d", level), func() bool {
		av, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
		if err != nil {
			return false
		}
		for _, f := range av.FinalizedFeatures {
			if f.Name == "transaction.version" {
				return f.MaxVersionLevel == level
			}
		}
		return level == 0
	})
	return old
}

// bytesSink returns an exactly-once sink of strings into topic.
func bytesSink(t *testing.T, brokers, topic, prefix string) *kafka.Sink[string] {
	t.Helper()
	s, err := kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topic: topic,
		TransactionalIDPrefix: prefix, TransactionTimeout: time.Minute},
		func(v string) (kafka.Message, error) { return kafka.Message{Value: []byte(v)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// prepare writes values through a new writer of subtask and prepares them.
func prepare(t *testing.T, s *kafka.Sink[string], subtask int, cp checkpoint.ID, values ...string) sink.Committable {
	t.Helper()
	ctx := context.Background()
	w, err := s.NewWriter(ctx, sink.WriterInfo{Job: "t", Sink: "out", Subtask: subtask, Parallelism: subtask + 1, Owner: writerOwner})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Write(ctx, values); err != nil {
		t.Fatal(err)
	}
	data, err := w.Prepare(ctx, cp)
	if err != nil || data == nil {
		t.Fatalf("prepare: %q, %v", data, err)
	}
	return sink.Committable{Checkpoint: cp, Subtask: subtask, Data: data}
}

// writerOwner is the owner of the job whose writers prepare the sink
// tests' transactions, restorerOwner the next owner, whose committers
// commit and abort them (a new process restoring the checkpoint).
var (
	writerOwner   = sink.Owner{Incarnation: "inc", Epoch: 1}
	restorerOwner = sink.Owner{Incarnation: "inc", Epoch: 2}
)

// committer opens a committer of s, as a new process would.
func committer(t *testing.T, s *kafka.Sink[string]) sink.Committer {
	t.Helper()
	c, err := s.NewCommitter(context.Background(), sink.CommitterInfo{Job: "t", Sink: "out", Owner: restorerOwner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// values returns the committed values of topic, sorted by arrival.
func values(t *testing.T, brokers, topic string, want int) []string {
	t.Helper()
	var vs []string
	for _, r := range kafkatest.ReadCommitted(t, brokers, topic, want, 10*time.Second) {
		vs = append(vs, string(r.Value))
	}
	return vs
}

// TestCommitInNewProcess prepares transactions, forgets the writer, and
// commits them from a fresh Sink (a new process), under transaction
// protocol 1 and 2: commit is idempotent, a commit after the id was
// reused is recognised as done, a transaction aborted before its commit
// is a permanent error.
func TestCommitInNewProcess(t *testing.T) {
	t.Parallel()
	// It changes the cluster's transaction.version: a broker of its own
	// (the faults instance under scripts/test.sh), which no other test
	// uses meanwhile.
	testenv.Exclusive(t, testenv.KafkaService)
	brokers := testenv.Kafka(t)
	for _, tv := range []int16{1, 2} {
		t.Run("tv"+strconv.Itoa(int(tv)), func(t *testing.T) {
			old := setTransactionVersion(t, brokers, tv)
			t.Cleanup(func() { setTransactionVersion(t, brokers, old) })
			adm := kafkatest.Admin(t, brokers)
			topic, prefix := kafkatest.UniqueName("commit"), kafkatest.UniqueName("commit-txn")
			kafkatest.CreateTopic(t, adm, topic, 2)
			ctx := context.Background()

			cm := prepare(t, bytesSink(t, brokers, topic, prefix), 0, 1, "a", "b", "c")
			var d struct {
				Version int `json:"tv"`
			}
			if err := json.Unmarshal(cm.Data, &d); err != nil || int16(d.Version) != tv {
				t.Fatalf("committable %s: protocol version %d, want %d (%v)", cm.Data, d.Version, tv, err)
			}
			if got := values(t, brokers, topic, 0); len(got) != 0 {
				t.Fatalf("prepared records visible before commit: %v", got)
			}
			// A new process commits, twice.
			fresh := bytesSink(t, brokers, topic, prefix)
			c := committer(t, fresh)
			for range 2 {
				if err := c.Commit(ctx, cm); err != nil {
					t.Fatal(err)
				}
			}
			// The id is reused for the next transactions, then the old
			// committable is committed again (crash after commit before
			// the next checkpoint): fenced, investigated, done.
			cm2 := prepare(t, fresh, 0, 2, "d")
			if err := c.Commit(ctx, cm2); err != nil {
				t.Fatal(err)
			}
			prepare(t, fresh, 0, 3, "lost")
			prepare(t, fresh, 0, 4, "lost")
			if err := committer(t, bytesSink(t, brokers, topic, prefix)).Commit(ctx, cm); err != nil {
				t.Fatalf("recommit after reuse: %v", err)
			}
			// A transaction aborted before its commit (fenced by
			// AbortLingering, as after a restore from an older checkpoint)
			// cannot be committed: permanent error.
			cm5 := prepare(t, fresh, 1, 5, "x")
			c2 := committer(t, bytesSink(t, brokers, topic, prefix))
			if err := c2.AbortLingering(ctx, 4); err != nil {
				t.Fatal(err)
			}
			err := c2.Commit(ctx, cm5)
			if !sink.IsPermanent(err) || !strings.Contains(err.Error(), "aborted") {
				t.Fatalf("commit of an aborted transaction: %v, want a permanent error", err)
			}
			t.Log(err)
			got := values(t, brokers, topic, 4)
			slices.Sort(got)
			if strings.Join(got, ",") != "a,b,c,d" {
				t.Fatalf("committed %v, want a b c d", got)
			}
			if ids := openTransactions(t, adm, prefix); len(ids) > 0 {
				t.Fatalf("open transactions left: %v", ids)
			}
		})
	}
}

// TestAbortLingeringLowerParallelism leaves open and prepared
// transactions of three subtasks, then restores with one: AbortLingering
// aborts them all, so read_committed readers are not held back.
func TestAbortLingeringLowerParallelism(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic, prefix := kafkatest.UniqueName("lower"), kafkatest.UniqueName("lower-txn")
	kafkatest.CreateTopic(t, adm, topic, 1)
	ctx := context.Background()
	s := bytesSink(t, brokers, topic, prefix)
	for sub := range 3 {
		prepare(t, s, sub, 7, fmt.Sprintf("prepared-%d", sub))
	}
	// An open, unprepared transaction of subtask 2.
	w, err := s.NewWriter(ctx, sink.WriterInfo{Job: "t", Sink: "out", Subtask: 2, Parallelism: 3, Owner: writerOwner})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, []string{"open"}); err != nil {
		t.Fatal(err)
	}
	// Unprepared, the writer's transaction shows in the coordinator once
	// its first record is sent: wait for it, however loaded the machine
	// (a fixed 200 ms was too short beside the other tests).
	var ids []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if ids = openTransactions(t, adm, prefix); len(ids) >= 4 || time.Now().After(deadline) {
			break
		}
	}
	if len(ids) != 4 {
		t.Fatalf("open transactions before recovery: %v, want 4", ids)
	}
	// A committed record after them is not readable: the LSO is held back.
	produceCommitted(t, brokers, topic)
	if got := kafkatest.ReadCommitted(t, brokers, topic, 1, 3*time.Second); len(got) != 0 {
		t.Fatalf("read %d records while transactions were open", len(got))
	}
	// Recovery with parallelism 1 (checkpoint 6 had no committables).
	if err := committer(t, bytesSink(t, brokers, topic, prefix)).AbortLingering(ctx, 6); err != nil {
		t.Fatal(err)
	}
	if ids := openTransactions(t, adm, prefix); len(ids) != 0 {
		t.Fatalf("open transactions after recovery: %v", ids)
	}
	if got := values(t, brokers, topic, 1); strings.Join(got, ",") != "after" {
		t.Fatalf("read %v after recovery, want only the committed record", got)
	}
	w.Close()
}

// produceCommitted writes one committed record "after" into topic.
func produceCommitted(t *testing.T, brokers, topic string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: topic, Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestWriterPool runs one writer through many transactions with a pool of
// two ids: the producer opened ahead for the next transaction takes no id
// from prepared transactions, so exactly two may wait for their commit;
// the third Write then fails, and works again once a commit frees an id.
// Nothing is left open after Close.
func TestWriterPool(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic, prefix := kafkatest.UniqueName("pool"), kafkatest.UniqueName("pool-txn")
	kafkatest.CreateTopic(t, adm, topic, 2)
	ctx := context.Background()
	s, err := kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topic: topic,
		TransactionalIDPrefix: prefix, TransactionTimeout: time.Minute, PoolSize: 2},
		func(v string) (kafka.Message, error) { return kafka.Message{Value: []byte(v)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	c := committer(t, s)
	w, err := s.NewWriter(ctx, sink.WriterInfo{Job: "t", Sink: "out", Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var want []string
	prepare := func(cp checkpoint.ID) sink.Committable {
		t.Helper()
		v := "v" + strconv.Itoa(int(cp))
		want = append(want, v)
		if err := w.Write(ctx, []string{v}); err != nil {
			t.Fatalf("checkpoint %d: write: %v", cp, err)
		}
		data, err := w.Prepare(ctx, cp)
		if err != nil || data == nil {
			t.Fatalf("checkpoint %d: prepare: %q, %v", cp, data, err)
		}
		return sink.Committable{Checkpoint: cp, Subtask: 0, Data: data}
	}
	for cp := checkpoint.ID(1); cp <= 5; cp++ {
		if err := c.Commit(ctx, prepare(cp)); err != nil {
			t.Fatal(err)
		}
	}
	cm6, cm7 := prepare(6), prepare(7)
	err = w.Write(ctx, []string{"v8"})
	wantErr(t, err, "all 2 transactional ids")
	if err := c.Commit(ctx, cm6); err != nil {
		t.Fatal(err)
	}
	cm8 := prepare(8)
	for _, cm := range []sink.Committable{cm7, cm8} {
		if err := c.Commit(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := values(t, brokers, topic, len(want))
	slices.Sort(got)
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("committed %v, want %v", got, want)
	}
	if ids := openTransactions(t, adm, prefix); len(ids) > 0 {
		t.Fatalf("open transactions left: %v", ids)
	}
}
