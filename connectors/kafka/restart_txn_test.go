package kafka_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/twmb/franz-go/pkg/kadm"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
)

// recorded is what a committable records of its transaction.
type recorded struct {
	TxnID string `json:"txn"`
	PID   int64  `json:"pid"`
	Epoch int16  `json:"epoch"`
}

// TestBrokerRestartAroundPrepare SIGKILLs and restarts the broker while a
// transaction is open (between its records and its prepare) and again
// between its prepare and its commit, two rounds: each prepared
// transaction's recorded producer epoch must be the coordinator's, and
// its commit by a new committer (a restarted process) must make its
// records visible exactly once; committing it again from a third process
// (killed after the commit, before its next checkpoint: its Fence has
// bumped the epoch, so the coordinator answers PRODUCER_FENCED) must find
// it committed in the log. (The 529-fault torture run lost a
// prepared transaction whose commit was answered PRODUCER_FENCED after a
// broker restart; this looks for that at its likeliest moments.)
func TestBrokerRestartAroundPrepare(t *testing.T) {
	t.Parallel()
	testenv.Exclusive(t, testenv.KafkaService)
	brokers := testenv.Kafka(t)
	if st, err := testenv.Script(t, testenv.KafkaService, "status"); err != nil || !strings.Contains(string(st), "="+brokers) {
		t.Skipf("the broker at %s was not started by scripts/kafka.sh: cannot restart it", brokers)
	}
	restart := func(when string) {
		t.Helper()
		if o, err := testenv.Script(t, testenv.KafkaService, "restart"); err != nil {
			t.Fatalf("restarting the broker %s: %v\n%s", when, err, o)
		}
	}
	adm := kafkatest.Admin(t, brokers)
	topic, prefix := kafkatest.UniqueName("bounce-prep"), kafkatest.UniqueName("bounce-prep-txn")
	kafkatest.CreateTopic(t, adm, topic, 1)
	ctx := context.Background()
	info := sink.WriterInfo{Job: "t", Sink: "out", Parallelism: 1, Owner: sink.Owner{Incarnation: "inc", Epoch: 1}}
	want := 0
	for round := 1; round <= 2; round++ {
		s := ownedSink(t, brokers, topic, prefix)
		w := ownedWriter(t, s, info)
		values := make([]string, 50)
		for i := range values {
			values[i] = fmt.Sprintf("r%d-%d", round, i)
		}
		if err := w.Write(ctx, values); err != nil {
			t.Fatal(err)
		}
		restart("with the transaction open")
		data, err := w.Prepare(ctx, checkpoint.ID(round))
		if err != nil {
			// The checkpoint fails; the job would restart. Not a loss.
			t.Logf("round %d: prepare after the restart failed (the checkpoint would be declined): %v", round, err)
			continue
		}
		var rec recorded
		if err := json.Unmarshal(data, &rec); err != nil {
			t.Fatalf("committable %s: %v", data, err)
		}
		// The admin client's connection may have been cut by the
		// restart: its first request can answer EOF.
		var d kadm.DescribedTransaction
		kafkatest.WaitFor(t, 30*time.Second, "the coordinator to describe "+rec.TxnID, func() bool {
			desc, err := adm.DescribeTransactions(ctx, rec.TxnID)
			if err == nil {
				d, err = desc.On(rec.TxnID, nil)
			}
			if err != nil {
				t.Logf("round %d: describing %s: %v; asking again", round, rec.TxnID, err)
			}
			return err == nil
		})
		t.Logf("round %d: %s recorded producer %d epoch %d; the coordinator has producer %d epoch %d, state %s",
			round, rec.TxnID, rec.PID, rec.Epoch, d.ProducerID, d.ProducerEpoch, d.State)
		if d.ProducerID != rec.PID || d.ProducerEpoch != rec.Epoch || d.State != "Ongoing" {
			t.Errorf("round %d: the prepared transaction's recorded identity (producer %d epoch %d) is not the coordinator's (producer %d epoch %d, %s): its commit will be refused",
				round, rec.PID, rec.Epoch, d.ProducerID, d.ProducerEpoch, d.State)
		}
		restart("between prepare and commit")
		committed := sink.Committable{Checkpoint: checkpoint.ID(round), Data: data}
		start(t, ownedCommitter(t, ownedSink(t, brokers, topic, prefix), info), checkpoint.ID(round), committed)
		start(t, ownedCommitter(t, ownedSink(t, brokers, topic, prefix), info), checkpoint.ID(round), committed)
		want += len(values)
	}
	got := kafkatest.ReadCommitted(t, brokers, topic, want, time.Minute)
	seen := map[string]int{}
	for _, r := range got {
		seen[string(r.Value)]++
	}
	for v, n := range seen {
		if n != 1 {
			t.Errorf("%s visible %d times", v, n)
		}
	}
	if len(got) != want {
		t.Errorf("%d records visible, want %d", len(got), want)
	}
	if ids := openTransactions(t, adm, prefix); len(ids) > 0 {
		t.Errorf("transactions left open: %v", ids)
	}
}
