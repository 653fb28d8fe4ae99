package kafka_test

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/internal/crashtest/crashtesting"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/stream"
)

const (
	crashKeys   = 40
	crashPerKey = 1500
	// crashDelay slows each record so that a run takes ~4s without kills.
	crashDelay = 100 * time.Microsecond
)

// runCrashChild runs the count job described by the environment the
// parent set, until its bounded input is done.
func runCrashChild(t *testing.T, brokers string) {
	conn := kafka.Conn{Brokers: []string{brokers}}
	switch os.Getenv("KT_OVER") {
	case overSASLSSL:
		conn = saslConn(kafkatest.Secured{KafkaSecured: testenv.KafkaTLS(t), User: os.Getenv("KT_SASL_USER"), Password: os.Getenv("KT_SASL_PASSWORD"), CA: kafkatest.BrokersCA(t)})
	case overMTLS:
		conn = kafka.Conn{Brokers: []string{testenv.KafkaTLS(t).MTLS}, TLS: &tls.Config{RootCAs: kafkatest.BrokersCA(t), Certificates: []tls.Certificate{kafkatest.MTLSClient(t)}}}
	}
	j, err := countJob(conn, os.Getenv("KT_IN"), os.Getenv("KT_OUT"), os.Getenv("KT_PREFIX"), 2, 200*time.Millisecond, crashDelay)
	if err != nil {
		t.Fatal(err)
	}
	err = j.Run(context.Background(), stream.Options{
		CheckpointDir:      os.Getenv("KT_CKPT"),
		CheckpointInterval: 200 * time.Millisecond,
		Probe:              crashtest.Probe(),
	})
	if err != nil {
		t.Fatal(err)
	}
}

// crashRun prepares topics, runs the count job under crashtest with o,
// and verifies the committed output.
func crashRun(t *testing.T, o crashtest.Options) { crashRunOver(t, o, "") }

// The secured listeners crashRunOver runs the job over.
const (
	overSASLSSL = "sasl_ssl" // as a SCRAM user
	overMTLS    = "mtls"     // as the mTLS user
)

// crashRunOver is crashRun; over a secured listener (overSASLSSL,
// overMTLS), the job's principal is allowed only the test's resources.
func crashRunOver(t *testing.T, o crashtest.Options, over string) {
	brokers := testenv.Kafka(t)
	if crashtest.IsChild() {
		runCrashChild(t, brokers)
		return
	}
	adm := kafkatest.Admin(t, brokers)
	in, out, prefix := kafkatest.UniqueName("crash-in"), kafkatest.UniqueName("crash-out"), kafkatest.UniqueName("crash-txn")
	if over != "" {
		name := kafkatest.UniqueName("crash-" + over)
		in, out, prefix = name+"-in", name+"-out", name+"-txn"
		sec := kafkatest.NewSecured(t, adm, name)
		o.Env = append(o.Env, "KT_OVER="+over, "KT_SASL_USER="+sec.User, "KT_SASL_PASSWORD="+sec.Password)
	}
	kafkatest.CreateTopic(t, adm, in, 4)
	kafkatest.CreateTopic(t, adm, out, 3)
	produceInput(t, brokers, in, crashKeys, crashPerKey)
	o.Env = append(o.Env, "KT_IN="+in, "KT_OUT="+out, "KT_PREFIX="+prefix, "KT_CKPT="+filepath.Join(t.TempDir(), "ckpt"))
	rep := crashtesting.Run(t, o)
	t.Log(rep)
	checkCounts(t, kafkatest.ReadCommitted(t, brokers, out, crashKeys*crashPerKey, time.Minute), crashKeys, crashPerKey)
	if ids := openTransactions(t, adm, prefix); len(ids) > 0 {
		t.Errorf("transactions left open: %v", ids)
	}
}

// TestCrashExactlyOnce kills the job process 20 times at random moments
// and protocol points, biased to the window between checkpoint completion
// and commit, and checks that a read_committed reader sees every count
// exactly once.
func TestCrashExactlyOnce(t *testing.T) {
	t.Parallel()
	crashRun(t, crashtest.Options{Kills: crashtesting.Sized(20, 60)})
}

// TestCrashOverSASLSSL is TestCrashExactlyOnce over the SASL_SSL listener
// (SCRAM-SHA-512, TLS, ACLs enforced), with fewer kills.
func TestCrashOverSASLSSL(t *testing.T) {
	t.Parallel()
	crashRunOver(t, crashtest.Options{Kills: crashtesting.Sized(8, 60)}, overSASLSSL)
}

// TestCrashOverMTLS is TestCrashExactlyOnce over the listener that
// requires client certificates, as the mTLS user; only in the full run
// (EXACTLY_TEST_SIZE=full): the test command runs it over SASL_SSL.
func TestCrashOverMTLS(t *testing.T) {
	if !crashtesting.Full() {
		t.Skip("only with EXACTLY_TEST_SIZE=full: the test command runs TestCrashOverSASLSSL")
	}
	t.Parallel()
	crashRunOver(t, crashtest.Options{Kills: 60}, overMTLS)
}

// TestCrashBeforeCommit kills the job only when a checkpoint is complete
// and nothing is committed yet: the restarted job must commit the
// prepared transactions, not produce their records again.
func TestCrashBeforeCommit(t *testing.T) {
	t.Parallel()
	crashRun(t, crashtest.Options{Kills: crashtesting.Sized(6, 20), Points: []stream.ProbePoint{stream.ProbeMetadataWritten}})
}
