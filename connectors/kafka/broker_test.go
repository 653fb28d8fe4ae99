package kafka_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/stream"
)

// TestBrokerRestart SIGKILLs and restarts the broker three times while
// the count job runs; the committed output must still hold every count
// exactly once, with no transaction left open.
func TestBrokerRestart(t *testing.T) {
	t.Parallel()
	testenv.Exclusive(t, testenv.KafkaService)
	brokers := testenv.Kafka(t)
	st, err := testenv.Script(t, testenv.KafkaService, "status")
	if err != nil || !strings.Contains(string(st), "="+brokers) {
		t.Skipf("the broker at %s was not started by scripts/kafka.sh: cannot restart it", brokers)
	}
	const keys, perKey = 20, 1500
	adm := kafkatest.Admin(t, brokers)
	in, out, prefix := kafkatest.UniqueName("bounce-in"), kafkatest.UniqueName("bounce-out"), kafkatest.UniqueName("bounce-txn")
	kafkatest.CreateTopic(t, adm, in, 4)
	kafkatest.CreateTopic(t, adm, out, 3)
	produceInput(t, brokers, in, keys, perKey)
	j, err := countJob(kafka.Conn{Brokers: []string{brokers}}, in, out, prefix, 2, 200*time.Millisecond, 500*time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		done <- j.Run(context.Background(), stream.Options{
			CheckpointDir:      filepath.Join(t.TempDir(), "ckpt"),
			CheckpointInterval: 200 * time.Millisecond,
			Restart:            stream.RestartStrategy{MaxAttempts: 1000, MaxBackoff: time.Second},
		})
	}()
	restarts := 0
	for restarts < 3 {
		select {
		case err := <-done:
			t.Fatalf("the job ended after %d broker restarts, before the test could make 3 (err %v): slow it down", restarts, err)
		case <-time.After(3 * time.Second):
		}
		if o, err := testenv.Script(t, testenv.KafkaService, "restart"); err != nil {
			t.Fatalf("restarting the broker: %v\n%s", err, o)
		}
		restarts++
		t.Logf("broker SIGKILLed and restarted (%d)", restarts)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the job did not finish within 3 minutes of the last broker restart")
	}
	checkCounts(t, kafkatest.ReadCommitted(t, brokers, out, keys*perKey, time.Minute), keys, perKey)
	if ids := openTransactions(t, adm, prefix); len(ids) > 0 {
		t.Errorf("transactions left open: %v", ids)
	}
}
