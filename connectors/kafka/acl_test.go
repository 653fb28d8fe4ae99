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
