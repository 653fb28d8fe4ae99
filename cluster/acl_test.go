package cluster_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/cluster"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/stream"
)

// TestClusterMinimalACLs runs stagesJob (three stages, two repartition
// topics) on one instance with cluster.RunJob's StartJob, as a SCRAM user
// over SASL_SSL that holds exactly the ACLs docs/kafka.md lists for a job
// run on a cluster, and then without each one in turn. Without one, the
// instance stops at once (MaxFailedTasks 1) with a permanent error naming
// the ACL to grant and its resource; with all, the output is exact.
//
// Each run is a job of its own name under one prefix, so that a run does
// not find the repartition topics, group or checkpoints of the one before
// it; the ACLs are prefixed on that prefix, as docs/kafka.md advises.
func TestClusterMinimalACLs(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	base := kafkatest.UniqueName("clacl")
	user := kafkatest.NewSCRAMUser(t, adm, base)
	in, out := "in-"+base, "out-"+base
	kafkatest.CreateTopic(t, adm, in, 2)
	kafkatest.CreateTopic(t, adm, out, 2)
	kafkatest.DeleteRepartitionTopicsAtEnd(t, adm, base)
	const keys, perKey = 6, 10
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(in))
	if err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	for i := range perKey {
		for k := range keys {
			recs = append(recs, &kgo.Record{Key: []byte(fmt.Sprintf("k%02d", k)), Value: []byte(fmt.Sprint(i))})
		}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()

	principal := "User:" + user.User
	acl := func(b *kadm.ACLBuilder, op kadm.ACLOperation) *kadm.ACLBuilder {
		return b.Allow(principal).AllowHosts().Operations(op)
	}
	prefixed := func(b *kadm.ACLBuilder) *kadm.ACLBuilder { return b.ResourcePatternType(kadm.ACLPatternPrefixed) }
	acls := []struct {
		name     string
		b        *kadm.ACLBuilder
		op, what string // in the error
	}{
		// First: a later run would find the repartition topics created.
		{"Create on the repartition topics", acl(prefixed(kadm.NewACLs().Topics(base)), kadm.OpCreate), "Create", "topic " + base},
		{"DescribeConfigs on the repartition topics", acl(prefixed(kadm.NewACLs().Topics(base)), kadm.OpDescribeConfigs), "DescribeConfigs", "topic " + base},
		{"Read on the input topic", acl(kadm.NewACLs().Topics(in), kadm.OpRead), "Read", "topic " + in},
		{"Read on the repartition topics", acl(prefixed(kadm.NewACLs().Topics(base)), kadm.OpRead), "Read", "topic " + base},
		{"Read on the group", acl(prefixed(kadm.NewACLs().Groups("exactly-"+base)), kadm.OpRead), "Read", "group exactly-" + base},
		{"Write on the repartition topics", acl(prefixed(kadm.NewACLs().Topics(base)), kadm.OpWrite), "Write", "topic " + base},
		{"Write on the output topic", acl(kadm.NewACLs().Topics(out), kadm.OpWrite), "Write", "topic " + out},
		{"Write on the transactional ids", acl(prefixed(kadm.NewACLs().TransactionalIDs("exactly-"+base)), kadm.OpWrite), "Write", `prefix "exactly-` + base},
	}
	for _, a := range acls {
		kafkatest.Grant(t, adm, a.b)
	}
	conn := kafka.Conn{Brokers: []string{user.SASLSSL}, TLS: &tls.Config{RootCAs: user.CA},
		SASL: kafka.SASL{Mechanism: kafka.SASLScramSHA512, User: user.User, Password: user.Password}, DialTimeout: 3 * time.Second}
	start := func(ctx context.Context, job string) (*cluster.Instance, error) {
		j, err := stagesJob(job, conn, in, out)
		if err != nil {
			t.Fatal(err)
		}
		return cluster.StartJob(ctx, j, cluster.Options{
			Group:          kafka.GroupOptions{Conn: conn, SessionTimeout: 6 * time.Second},
			Job:            stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 200 * time.Millisecond},
			MaxFailedTasks: 1,
		})
	}
	for i, a := range acls {
		t.Run("without "+a.name, func(t *testing.T) {
			kafkatest.Revoke(t, adm, a.b)
			defer kafkatest.CreateACLs(t, adm, a.b) // the test's Grant revokes it at the end
			ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
			defer cancel()
			began := time.Now()
			inst, err := start(ctx, fmt.Sprintf("%s-%d", base, i))
			if err == nil {
				err = inst.Wait()
			}
			t.Logf("after %v: %v", time.Since(began).Round(time.Millisecond), err)
			switch {
			case err == nil:
				t.Fatal("the instance ran without the ACL")
			case ctx.Err() != nil:
				t.Fatalf("the instance was still trying when the test gave up: the refusal must stop it at once")
			case !sink.IsPermanent(err):
				t.Errorf("the error is not permanent")
			}
			for _, want := range []string{"grant it the ACL " + a.op, a.what, principal} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not name %q", want)
				}
			}
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	inst, err := start(ctx, base+"-all")
	if err != nil {
		t.Fatalf("with every ACL: %v", err)
	}
	got := kafkatest.ReadCommitted(t, brokers, out, keys*perKey, 2*time.Minute)
	cancel()
	if err := inst.Wait(); err != nil {
		t.Fatalf("with every ACL: %v", err)
	}
	var values, want []string
	for _, r := range got {
		values = append(values, string(r.Value))
	}
	for g := range 5 {
		for c := 1; c <= keys*perKey/5; c++ {
			want = append(want, fmt.Sprintf("%d:%d", g, c))
		}
	}
	slices.Sort(values)
	slices.Sort(want)
	if !slices.Equal(values, want) {
		t.Errorf("committed output: %d records, want %d; first difference: %s", len(values), len(want), firstDifference(values, want))
	}
}
