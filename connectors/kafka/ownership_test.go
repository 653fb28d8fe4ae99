package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/stream"
)

// ownedSink returns an exactly-once sink of strings into topic with the
// default transactional id prefix when prefix is empty.
func ownedSink(t *testing.T, brokers, topic, prefix string) *kafka.Sink[string] {
	t.Helper()
	s, err := kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topic: topic,
		TransactionalIDPrefix: prefix, TransactionTimeout: 5 * time.Minute},
		func(v string) (kafka.Message, error) { return kafka.Message{Value: []byte(v)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ownedCommitter opens a committer of s for the job and sink in info, as
// owner.
func ownedCommitter(t *testing.T, s *kafka.Sink[string], info sink.WriterInfo) sink.Committer {
	t.Helper()
	c, err := s.NewCommitter(context.Background(), sink.CommitterInfo{Job: info.Job, Sink: info.Sink, Owner: info.Owner})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// ownedWriter opens the writer described by info.
func ownedWriter(t *testing.T, s *kafka.Sink[string], info sink.WriterInfo) sink.Writer[string] {
	t.Helper()
	w, err := s.NewWriter(context.Background(), info)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// writeAndPrepare writes values into w and prepares them for checkpoint cp.
func writeAndPrepare(ctx context.Context, w sink.Writer[string], cp checkpoint.ID, values ...string) ([]byte, error) {
	if err := w.Write(ctx, values); err != nil {
		return nil, err
	}
	return w.Prepare(ctx, cp)
}

// start runs the engine's start sequence for a sink: Fence, commit the
// restored committables, AbortLingering.
func start(t *testing.T, c sink.Committer, restored checkpoint.ID, committables ...sink.Committable) {
	t.Helper()
	ctx := context.Background()
	if err := c.Fence(ctx, restored); err != nil {
		t.Fatalf("fence: %v", err)
	}
	for _, cm := range committables {
		if err := c.Commit(ctx, cm); err != nil {
			t.Fatalf("commit restored checkpoint %d: %v", cm.Checkpoint, err)
		}
	}
	if err := c.AbortLingering(ctx, restored); err != nil {
		t.Fatalf("abort lingering: %v", err)
	}
}

// TestDefaultPrefixUnambiguous (issue 10, case 5): job "X-v2" with sink
// "totals" and job "X" with sink "v2-totals" got the same default
// transactional ids, so starting one aborted the other's prepared
// transaction. With the default prefix they no longer collide; two jobs
// given the same explicit prefix still do, and the failed commit then says
// that another producer took the ids over.
func TestDefaultPrefixUnambiguous(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic, u := kafkatest.UniqueName("prefix"), kafkatest.UniqueName("orders")
	if a, b := kafka.DefaultTransactionalIDPrefix(u+"-v2", "totals"), kafka.DefaultTransactionalIDPrefix(u, "v2-totals"); a == b {
		t.Fatalf("jobs %q and %q: the same default prefix %q", u+"-v2", u, a)
	}
	kafkatest.CreateTopic(t, adm, topic, 1)
	ctx := context.Background()
	for _, tc := range []struct {
		name, prefix string
	}{{"default", ""}, {"explicit-shared", kafkatest.UniqueName("shared")}} {
		t.Run(tc.name, func(t *testing.T) {
			a := sink.WriterInfo{Job: u + "-" + tc.name + "-v2", Sink: "totals", Parallelism: 1}
			b := sink.WriterInfo{Job: u + "-" + tc.name, Sink: "v2-totals", Parallelism: 1}
			sa, sb := ownedSink(t, brokers, topic, tc.prefix), ownedSink(t, brokers, topic, tc.prefix)
			data, err := writeAndPrepare(ctx, ownedWriter(t, sa, a), 1, "a-"+tc.name)
			if err != nil {
				t.Fatal(err)
			}
			// Job b starts: its writer opens and its committer recovers.
			ownedWriter(t, sb, b)
			start(t, ownedCommitter(t, sb, b), 0)
			if tc.prefix != "" {
				// The writer opens its first producer in the background;
				// its InitProducerID under the shared id aborts a's
				// transaction. Wait for it, or a's commit may come first.
				kafkatest.WaitFor(t, 10*time.Second, "job b's producer to take over the shared id", func() bool {
					return len(openTransactions(t, adm, tc.prefix)) == 0
				})
			}
			err = ownedCommitter(t, sa, a).Commit(ctx, sink.Committable{Checkpoint: 1, Data: data})
			if tc.prefix == "" {
				if err != nil {
					t.Fatalf("job %q: commit after job %q started: %v", a.Job, b.Job, err)
				}
				return
			}
			t.Log(err)
			if !errors.Is(err, sink.ErrFenced) || !strings.Contains(err.Error(), "another producer with the same transactional id") {
				t.Fatalf("commit of a transaction another job fenced: %v; want an error wrapping sink.ErrFenced that names the cause", err)
			}
		})
	}
	if got := values(t, brokers, topic, 1); strings.Join(got, ",") != "a-default" {
		t.Errorf("committed %v, want [a-default]", got)
	}
	if ids := openTransactions(t, adm, "exactly-"+u); len(ids) > 0 {
		t.Errorf("open transactions left: %v", ids)
	}
}

// TestLegacyPrefixUpgrade: a job restored from a checkpoint written under
// the former default prefix "exactly-{job}-{sink}" commits its
// transactions and aborts that run's lingering ones.
func TestLegacyPrefixUpgrade(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic, job := kafkatest.UniqueName("legacy"), kafkatest.UniqueName("legacy-job")
	kafkatest.CreateTopic(t, adm, topic, 1)
	ctx := context.Background()
	legacyPrefix := "exactly-" + job + "-out"
	old := ownedSink(t, brokers, topic, legacyPrefix) // what the former default made
	info := sink.WriterInfo{Job: job, Sink: "out", Parallelism: 2}
	data, err := writeAndPrepare(ctx, ownedWriter(t, old, info), 1, "prepared")
	if err != nil {
		t.Fatal(err)
	}
	info1 := info
	info1.Subtask = 1
	if err := ownedWriter(t, old, info1).Write(ctx, []string{"open"}); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 10*time.Second, "two open transactions", func() bool { return len(openTransactions(t, adm, legacyPrefix)) == 2 })
	start(t, ownedCommitter(t, ownedSink(t, brokers, topic, ""), info), 1, sink.Committable{Checkpoint: 1, Data: data})
	if ids := openTransactions(t, adm, legacyPrefix); len(ids) > 0 {
		t.Errorf("open transactions under the former default prefix after the upgrade: %v", ids)
	}
	if got := values(t, brokers, topic, 1); strings.Join(got, ",") != "prepared" {
		t.Errorf("committed %v, want [prepared]", got)
	}
}

// TestZombieCannotCommitAfterFence (issue 10, case 6): an old owner of the
// job (a zombie) keeps its writer and committer while a new owner fences
// and restores checkpoint 2. The new owner commits what checkpoint 2
// covers; after its Fence the zombie cannot write a new transaction, and
// after the restore it cannot commit the transaction it prepared for
// checkpoint 3: both fail with sink.ErrFenced.
func TestZombieCannotCommitAfterFence(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic, prefix := kafkatest.UniqueName("zombie"), kafkatest.UniqueName("zombie-txn")
	kafkatest.CreateTopic(t, adm, topic, 1)
	ctx := context.Background()
	oldOwner := sink.WriterInfo{Job: "t", Sink: "out", Parallelism: 1, Owner: sink.Owner{Incarnation: "inc", Epoch: 1}}
	newOwner := oldOwner
	newOwner.Owner.Epoch = 2

	zombieSink := ownedSink(t, brokers, topic, prefix)
	zw := ownedWriter(t, zombieSink, oldOwner)
	zc := ownedCommitter(t, zombieSink, oldOwner)
	restored, err := writeAndPrepare(ctx, zw, 2, "restored")
	if err != nil {
		t.Fatal(err)
	}
	uncovered, err := writeAndPrepare(ctx, zw, 3, "uncovered")
	if err != nil {
		t.Fatal(err)
	}
	// The zombie's writer has opened its next producer (slot 2) ahead.
	kafkatest.WaitFor(t, 10*time.Second, "the producer opened ahead", func() bool { return len(knownTransactionalIDs(t, adm, prefix)) == 3 })

	nc := ownedCommitter(t, ownedSink(t, brokers, topic, prefix), newOwner)
	if err := nc.Fence(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if data, err := writeAndPrepare(ctx, zw, 4, "late"); err == nil {
		err = zc.Commit(ctx, sink.Committable{Checkpoint: 4, Data: data})
		t.Errorf("the zombie wrote, prepared and committed a transaction after the new owner's Fence (commit: %v)", err)
	} else if !errors.Is(err, sink.ErrFenced) {
		t.Errorf("zombie write after Fence: %v; want an error wrapping sink.ErrFenced", err)
	} else {
		t.Log(err)
	}
	if err := nc.Commit(ctx, sink.Committable{Checkpoint: 2, Data: restored}); err != nil {
		t.Fatalf("the new owner commits the restored checkpoint: %v", err)
	}
	if err := nc.AbortLingering(ctx, 2); err != nil {
		t.Fatal(err)
	}
	err = zc.Commit(ctx, sink.Committable{Checkpoint: 3, Data: uncovered})
	t.Log(err)
	if !errors.Is(err, sink.ErrFenced) || !strings.Contains(err.Error(), "took over") {
		t.Errorf("zombie commit after the new owner's restore: %v; want an error wrapping sink.ErrFenced saying another owner took over", err)
	}
	// Committing the restored checkpoint again changes nothing.
	if err := zc.Commit(ctx, sink.Committable{Checkpoint: 2, Data: restored}); err != nil {
		t.Errorf("zombie recommit of the restored checkpoint: %v", err)
	}
	// The new owner (epoch 2: slots 2·PoolSize …) writes under its first
	// slot and opens its second ahead. The zombie's clean stop then
	// aborts its uncovered transaction (slot 1 of the zombie's own pool):
	// that must not fence the new owner's producer.
	slot1 := prefix + "-0-" + strconv.Itoa(2*kafka.DefaultPoolSize+1)
	nw := ownedWriter(t, ownedSink(t, brokers, topic, prefix), newOwner)
	first, err := writeAndPrepare(ctx, nw, 5, "new owner 5")
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 10*time.Second, "the new owner's producer opened ahead", func() bool {
		return slices.Contains(knownTransactionalIDs(t, adm, prefix), slot1)
	})
	err = zc.Abort(ctx, sink.Committable{Checkpoint: 3, Data: uncovered})
	t.Log(err)
	if !errors.Is(err, sink.ErrFenced) {
		t.Errorf("zombie abort after the new owner's restore: %v; want an error wrapping sink.ErrFenced", err)
	}
	second, err := writeAndPrepare(ctx, nw, 6, "new owner 6")
	if err != nil {
		t.Fatalf("the new owner's transaction under %s after the zombie's abort: %v", slot1, err)
	}
	for cp, data := range map[checkpoint.ID][]byte{5: first, 6: second} {
		if err := nc.Commit(ctx, sink.Committable{Checkpoint: cp, Data: data}); err != nil {
			t.Errorf("the new owner's commit of checkpoint %d: %v", cp, err)
		}
	}
	// A zombie that keeps running opens producers again (InitProducerID):
	// on ids of its own pool, so the new owner's prepared transaction is
	// untouched and commits (when zombie and owner shared ids, the
	// zombie's InitProducerID could abort it: seen in
	// TestClusterMovesStages; see TestZombieTwoEpochsBehind too).
	third, err := writeAndPrepare(ctx, nw, 7, "new owner 7")
	if err != nil {
		t.Fatal(err)
	}
	for cp := checkpoint.ID(8); cp < 8+checkpoint.ID(kafka.DefaultPoolSize); cp++ {
		_, _ = writeAndPrepare(ctx, zw, cp, "zombie, late") // each opens a producer on one of its ids
	}
	if err := nc.Commit(ctx, sink.Committable{Checkpoint: 7, Data: third}); err != nil {
		t.Errorf("the new owner's commit after the zombie opened producers again: %v", err)
	}
	got := values(t, brokers, topic, 4)
	slices.Sort(got)
	if strings.Join(got, ",") != "new owner 5,new owner 6,new owner 7,restored" {
		t.Errorf("committed %v, want [new owner 5, new owner 6, new owner 7, restored]", got)
	}
}

// TestZombieTwoEpochsBehind: a zombie of epoch 1, kept alive while the
// job moved to epoch 2 and then to epoch 3, opens producers again
// (InitProducerID on every id of its pool) while the owner of epoch 3 has
// a transaction prepared for a checkpoint: the owner's commit succeeds.
// With one pool shared by every other epoch (until December 2026, odd and
// even epochs had one set each) the zombie's InitProducerID aborted that
// transaction and its records were lost (TestClusterMovesStages in CI:
// 3,068 of 6,000 records).
func TestZombieTwoEpochsBehind(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic, prefix := kafkatest.UniqueName("zombie2"), kafkatest.UniqueName("zombie2-txn")
	kafkatest.CreateTopic(t, adm, topic, 1)
	ctx := context.Background()
	owner := func(epoch uint64) sink.WriterInfo {
		return sink.WriterInfo{Job: "t", Sink: "out", Parallelism: 1, Owner: sink.Owner{Incarnation: "inc", Epoch: epoch}}
	}
	// The zombie's writer opens its producers from its pool's first slot
	// on, where the owner of epoch 3 writes first too when they share one.
	zw := ownedWriter(t, ownedSink(t, brokers, topic, prefix), owner(1))
	start(t, ownedCommitter(t, ownedSink(t, brokers, topic, prefix), owner(2)), 0)
	s3 := ownedSink(t, brokers, topic, prefix)
	c3 := ownedCommitter(t, s3, owner(3))
	start(t, c3, 0)
	var err error
	// Three prepared transactions, on the owner's first three slots.
	w3 := ownedWriter(t, s3, owner(3))
	prepared := map[checkpoint.ID][]byte{}
	for cp := checkpoint.ID(10); cp < 13; cp++ {
		if prepared[cp], err = writeAndPrepare(ctx, w3, cp, fmt.Sprint("owner 3, checkpoint ", cp)); err != nil {
			t.Fatal(err)
		}
	}
	for cp := checkpoint.ID(1); cp <= 2*checkpoint.ID(kafka.DefaultPoolSize); cp++ {
		_, _ = writeAndPrepare(ctx, zw, cp, "zombie, late") // each opens a producer on one of its ids
	}
	for cp, data := range prepared {
		if err := c3.Commit(ctx, sink.Committable{Checkpoint: cp, Data: data}); err != nil {
			t.Errorf("the owner of epoch 3 commits checkpoint %d after the zombie of epoch 1 opened producers: %v", cp, err)
		}
	}
	got := values(t, brokers, topic, 3)
	slices.Sort(got)
	if want := "owner 3, checkpoint 10,owner 3, checkpoint 11,owner 3, checkpoint 12"; strings.Join(got, ",") != want {
		t.Errorf("committed %v, want %s", got, want)
	}
}

// producerEpoch returns the current producer epoch of transactional id id.
func producerEpoch(t *testing.T, adm *kadm.Client, id string) int16 {
	t.Helper()
	ds, err := adm.DescribeTransactions(context.Background(), id)
	if err == nil {
		err = ds[id].Err
	}
	if err != nil {
		t.Fatal(err)
	}
	return ds[id].ProducerEpoch
}

// TestAbortPreparedTransaction: Abort by the current owner aborts a
// prepared transaction (read_committed readers pass it at once), and
// aborting it again succeeds.
func TestAbortPreparedTransaction(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic, prefix := kafkatest.UniqueName("abort"), kafkatest.UniqueName("abort-txn")
	kafkatest.CreateTopic(t, adm, topic, 1)
	ctx := context.Background()
	info := sink.WriterInfo{Job: "t", Sink: "out", Parallelism: 1, Owner: sink.Owner{Incarnation: "inc", Epoch: 1}}
	s := ownedSink(t, brokers, topic, prefix)
	data, err := writeAndPrepare(ctx, ownedWriter(t, s, info), 1, "aborted")
	if err != nil {
		t.Fatal(err)
	}
	c := ownedCommitter(t, s, info)
	for range 2 {
		if err := c.Abort(ctx, sink.Committable{Checkpoint: 1, Data: data}); err != nil {
			t.Fatal(err)
		}
	}
	if ids := openTransactions(t, adm, prefix); len(ids) > 0 {
		t.Errorf("open transactions after Abort: %v", ids)
	}
	if lso, hwm := stableOffsets(t, adm, topic); lso != hwm {
		t.Errorf("read_committed readers stop at offset %d of %d after Abort", lso, hwm)
	}
}

// TestCleanStopAbortsOpenTransaction (issue 10, case 12): a job stopped
// cleanly while its sink's transaction is open, between two checkpoints,
// leaves no Ongoing transaction: read_committed readers reach the end of
// the output at once instead of after transaction.timeout.ms.
func TestCleanStopAbortsOpenTransaction(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	in, out, prefix := kafkatest.UniqueName("stop-in"), kafkatest.UniqueName("stop-out"), kafkatest.UniqueName("stop-txn")
	kafkatest.CreateTopic(t, adm, in, 1)
	kafkatest.CreateTopic(t, adm, out, 1)
	produceInput(t, brokers, in, 1, 10)
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topics: []string{in}}, kafka.String())
	if err != nil {
		t.Fatal(err)
	}
	snk, err := kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topic: out,
		TransactionalIDPrefix: prefix, TransactionTimeout: 5 * time.Minute, CheckpointInterval: time.Minute},
		func(r kafka.Record[string]) (kafka.Message, error) { return kafka.Message{Value: []byte(r.Value)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New(kafkatest.UniqueName("stop"))
	stream.SinkTo(stream.Source(j, "in", src), "out", snk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r, err := j.Start(ctx, stream.Options{CheckpointDir: filepath.Join(t.TempDir(), "ckpt"), CheckpointInterval: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the sink's transaction to open", func() bool { return len(openTransactions(t, adm, prefix)) == 1 })
	cancel()
	if err := r.Wait(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	// The abort returns once the coordinator logged it; its markers reach
	// the partitions a moment later. Without the abort, readers would wait
	// for the 5-minute transaction timeout.
	kafkatest.WaitFor(t, 30*time.Second, "read_committed readers to reach the end of the output (the open transaction aborted)", func() bool {
		lso, hwm := stableOffsets(t, adm, out)
		return lso == hwm
	})
	// The coordinator moves the transaction from PrepareAbort to
	// CompleteAbort once the partitions answered its markers, which may be
	// a moment after the markers made the output readable.
	ids := openTransactions(t, adm, prefix)
	for deadline := time.Now().Add(30 * time.Second); len(ids) > 0 && time.Now().Before(deadline); ids = openTransactions(t, adm, prefix) {
		time.Sleep(20 * time.Millisecond)
	}
	if len(ids) > 0 {
		t.Errorf("transactions still open 30s after a clean stop: %v", ids)
		// Leave the broker clean for the other tests.
		start(t, ownedCommitter(t, ownedSink(t, brokers, out, prefix), sink.WriterInfo{Job: "t", Sink: "out", Owner: sink.Owner{Epoch: 1 << 20}}), 0)
	}
}
