package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/stream"
)

// TestMinimalACLs runs the exactly-once count job (a bounded source that
// starts at its group's committed offsets and commits its checkpoints'
// positions to the group, an exactly-once sink) as a SCRAM user holding exactly the ACLs that
// docs/kafka.md lists for them (Read, Write: each implies Describe), and
// then without each one in turn. Without one, the job stops at once with a
// permanent error naming the operation and the resource to grant; with
// all, every count is committed once.
func TestMinimalACLs(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	name := kafkatest.UniqueName("acls")
	user := kafkatest.NewSCRAMUser(t, adm, name)
	in, out, prefix, group := name+"-in", name+"-out", name+"-txn", name+"-group"
	kafkatest.CreateTopic(t, adm, in, 2)
	kafkatest.CreateTopic(t, adm, out, 2)
	const keys, perKey = 10, 20
	produceInput(t, brokers, in, keys, perKey)
	principal := "User:" + user.User
	acl := func(b *kadm.ACLBuilder, op kadm.ACLOperation) *kadm.ACLBuilder {
		return b.Allow(principal).AllowHosts().Operations(op)
	}
	acls := []struct {
		name     string
		b        *kadm.ACLBuilder
		op, what string // in the error
	}{
		{"Read on the input topic", acl(kadm.NewACLs().Topics(in), kadm.OpRead), "Read", "topic " + in},
		{"Read on the group", acl(kadm.NewACLs().Groups(group), kadm.OpRead), "Read", "group " + group},
		{"Write on the output topic", acl(kadm.NewACLs().Topics(out), kadm.OpWrite), "Write", "topic " + out},
		{"Write on the transactional ids", acl(kadm.NewACLs().TransactionalIDs(prefix).ResourcePatternType(kadm.ACLPatternPrefixed), kadm.OpWrite), "Write", prefix},
	}
	for _, a := range acls {
		kafkatest.Grant(t, adm, a.b)
	}
	conn := saslConn(user)
	run := func(ctx context.Context) error {
		j, err := countJobFrom(kafka.SourceOptions{Conn: conn, Topics: []string{in}, Bounded: true,
			Group: group, Start: kafka.Committed(kafka.Earliest()), CommitOffsets: true}, out, prefix, 2, 100*time.Millisecond, 0)
		if err != nil {
			t.Fatal(err)
		}
		return j.Run(ctx, stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 100 * time.Millisecond})
	}
	for _, a := range acls {
		t.Run("without "+a.name, func(t *testing.T) {
			kafkatest.Revoke(t, adm, a.b)
			defer kafkatest.CreateACLs(t, adm, a.b) // the test's Grant revokes it at the end
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := run(ctx)
			t.Log(err)
			switch {
			case err == nil:
				t.Fatal("the job ran without the ACL")
			case ctx.Err() != nil:
				t.Fatalf("the job was still trying when the test gave up: the refusal must stop it at once")
			case !sink.IsPermanent(err):
				t.Errorf("the error is not permanent")
			}
			for _, want := range []string{a.op, a.what, principal} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not name %q", want)
				}
			}
		})
	}
	if err := run(context.Background()); err != nil {
		t.Fatalf("with every ACL: %v", err)
	}
	checkCounts(t, kafkatest.ReadCommitted(t, brokers, out, keys*perKey, 30*time.Second), keys, perKey)
	// The group holds the positions of the last checkpoint: the end of the
	// input.
	committed, err := adm.FetchOffsets(context.Background(), group)
	if err != nil {
		t.Fatal(err)
	}
	var at int64
	committed.Each(func(o kadm.OffsetResponse) { at += o.At })
	if at != keys*perKey {
		t.Errorf("the group's committed offsets add up to %d, want %d (every input record)", at, keys*perKey)
	}
}

// TestReadBackNeedsRead: a commit sent again after a restart, whose answer
// says the transaction ended, reads the outcome back from the output
// topic, which needs Read on it: without that ACL the commit fails with
// the permanent error naming it; with it, the commit finds the
// transaction committed.
func TestReadBackNeedsRead(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	name := kafkatest.UniqueName("readback")
	user := kafkatest.NewSCRAMUser(t, adm, name)
	out, prefix := name+"-out", name+"-txn"
	kafkatest.CreateTopic(t, adm, out, 1)
	principal := "User:" + user.User
	kafkatest.Grant(t, adm, kadm.NewACLs().Allow(principal).AllowHosts().Topics(out).Operations(kadm.OpWrite))
	kafkatest.Grant(t, adm, kadm.NewACLs().Allow(principal).AllowHosts().TransactionalIDs(prefix).ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpWrite))
	ctx := context.Background()
	s, err := kafka.NewSink(kafka.SinkOptions{Conn: saslConn(user), Topic: out, TransactionalIDPrefix: prefix, TransactionTimeout: time.Minute},
		func(v string) (kafka.Message, error) { return kafka.Message{Value: []byte(v)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.NewWriter(ctx, sink.WriterInfo{Job: "t", Sink: "out", Subtask: 0, Parallelism: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	data, err := writeAndPrepare(ctx, w, 1, "a", "b")
	if err != nil {
		t.Fatal(err)
	}
	cm := sink.Committable{Checkpoint: 1, Subtask: 0, Data: data}
	if err := committer(t, s).Commit(ctx, cm); err != nil {
		t.Fatalf("commit: %v", err)
	}
	// A new process: it fences the earlier owners' idle ids (their epochs
	// bumped), then sends the restored commit again.
	restarted := committer(t, s)
	if err := restarted.Fence(ctx, 1); err != nil {
		t.Fatal(err)
	}
	err = restarted.Commit(ctx, cm)
	t.Log(err)
	if err == nil || !sink.IsPermanent(err) || !strings.Contains(err.Error(), "grant it the ACL Read on topic "+out) {
		t.Fatalf("the commit sent again without Read on the topic: %v; want the permanent error naming the ACL", err)
	}
	kafkatest.Grant(t, adm, kadm.NewACLs().Allow(principal).AllowHosts().Topics(out).Operations(kadm.OpRead))
	if err := committer(t, s).Commit(ctx, cm); err != nil {
		t.Fatalf("the commit sent again with Read on the topic: %v", err)
	}
}
