package kafka_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
)

// TestAbortPreparedTransactionEachProtocol is TestAbortPreparedTransaction
// under transaction protocols 1 and 2, five times each. Under protocol 1
// every first Abort failed with a spurious sink.ErrFenced (the retry of
// InitProducerID after CONCURRENT_TRANSACTIONS was fenced by the request's
// own bump), which stops a job. A second Abort of the same committable is
// still refused under protocol 1 (the id's epoch is one above, as after a
// newer owner's fence, and the two cannot be told apart): only protocol 2
// aborts twice.
func TestAbortPreparedTransactionEachProtocol(t *testing.T) {
	testenv.Exclusive(t, testenv.KafkaService) // it changes the cluster's transaction.version
	brokers := testenv.Kafka(t)
	for _, tv := range []int16{1, 2} {
		t.Run("tv"+strconv.Itoa(int(tv)), func(t *testing.T) {
			old := setTransactionVersion(t, brokers, tv)
			t.Cleanup(func() { setTransactionVersion(t, brokers, old) })
			adm := kafkatest.Admin(t, brokers)
			for i := range 5 {
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
				aborts := 2
				if tv == 1 {
					aborts = 1
				}
				for j := range aborts {
					if err := c.Abort(ctx, sink.Committable{Checkpoint: 1, Data: data}); err != nil {
						t.Fatalf("round %d abort %d: %v", i, j, err)
					}
				}
			}
		})
	}
}
