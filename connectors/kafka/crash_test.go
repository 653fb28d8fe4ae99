package kafka_test

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"syscall"
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
	out := kafka.SinkOptions{Topic: os.Getenv("KT_OUT"), TransactionalIDPrefix: os.Getenv("KT_PREFIX"), TransactionTimeout: time.Minute}
	if timeout := os.Getenv("KT_TXN_TIMEOUT"); timeout != "" {
		d, err := time.ParseDuration(timeout)
		if err != nil {
			t.Fatal(err)
		}
		out.TransactionTimeout, out.ReproduceAborted = d, true
	}
	if dir := os.Getenv("KT_KILL_REPRODUCTION"); dir != "" {
		killOnceInReproduction(t, dir)
	}
	j, err := countJobInto(kafka.SourceOptions{Conn: conn, Topics: []string{os.Getenv("KT_IN")}, Bounded: true}, out, 2, 200*time.Millisecond, crashDelay)
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
func crashRun(t *testing.T, o crashtest.Options) { crashRunOver(t, o, "", 0) }

// The secured listeners crashRunOver runs the job over.
const (
	overSASLSSL = "sasl_ssl" // as a SCRAM user
	overMTLS    = "mtls"     // as the mTLS user
)

// crashRunOver is crashRun; over a secured listener (overSASLSSL,
// overMTLS), the job's principal is allowed only the test's resources.
// With a txnTimeout, the sink runs with that TransactionTimeout and
// ReproduceAborted, and each killed run is followed by an outage: the
// next run starts only once the broker has aborted every open
// transaction of the sink (at least txnTimeout later); the output must
// then hold reproduced records.
func crashRunOver(t *testing.T, o crashtest.Options, over string, txnTimeout time.Duration) {
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
	if txnTimeout > 0 {
		o.Env = append(o.Env, "KT_TXN_TIMEOUT="+txnTimeout.String())
		o.During = func(ctx context.Context, run int, final bool) {
			<-ctx.Done()
			if final {
				return
			}
			began := time.Now()
			kafkatest.WaitFor(t, time.Minute, "the broker aborting the killed run's transactions at their timeout", func() bool {
				return len(openTransactions(t, adm, prefix)) == 0 && time.Since(began) > txnTimeout
			})
			t.Logf("run %d: outage of %v", run, time.Since(began).Round(time.Millisecond))
		}
	}
	rep := crashtesting.Run(t, o)
	t.Log(rep)
	recs := kafkatest.ReadCommitted(t, brokers, out, crashKeys*crashPerKey, time.Minute)
	checkCounts(t, recs, crashKeys, crashPerKey)
	if ids := openTransactions(t, adm, prefix); len(ids) > 0 {
		t.Errorf("transactions left open: %v", ids)
	}
	if txnTimeout > 0 {
		reproduced := 0
		for _, r := range recs {
			for _, h := range r.Headers {
				if h.Key == kafka.ReproducesHeader {
					reproduced++
				}
			}
		}
		t.Logf("%d of %d committed records were reproduced after the broker aborted their transaction", reproduced, len(recs))
		if reproduced == 0 {
			t.Errorf("no committed record was reproduced: no outage outlasted a completed checkpoint's transaction")
		}
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
	crashRunOver(t, crashtest.Options{Kills: crashtesting.Sized(8, 60)}, overSASLSSL, 0)
}

// TestCrashOverMTLS is TestCrashExactlyOnce over the listener that
// requires client certificates, as the mTLS user; only in the full run
// (EXACTLY_TEST_SIZE=full): the test command runs it over SASL_SSL.
func TestCrashOverMTLS(t *testing.T) {
	if !crashtesting.Full() {
		t.Skip("only with EXACTLY_TEST_SIZE=full: the test command runs TestCrashOverSASLSSL")
	}
	t.Parallel()
	crashRunOver(t, crashtest.Options{Kills: 60}, overMTLS, 0)
}

// TestCrashOutageLongerThanTransactionTimeout kills the job when a
// checkpoint is complete and not committed yet, and keeps it down until
// the broker has aborted the checkpoint's transaction at its timeout (2 s),
// with SinkOptions.ReproduceAborted: every count must be committed
// exactly once, reproduced records among them. Kills land at every point
// in the runs after a restore too, the reproduction's among them.
func TestCrashOutageLongerThanTransactionTimeout(t *testing.T) {
	t.Parallel()
	crashRunOver(t, crashtest.Options{Kills: crashtesting.Sized(3, 12), Points: []stream.ProbePoint{stream.ProbeMetadataWritten}}, "", 2*time.Second)
}

// TestCrashDuringReproduction is TestCrashOutageLongerThanTransactionTimeout
// with SIGKILLs inside the reproduction of an aborted transaction: once
// with its records written and its transaction open, once right after its
// commit. Each is followed by an outage like the others (the first one's
// open transaction is aborted at its timeout too). Every count must be
// committed exactly once, and both kills must have happened.
func TestCrashDuringReproduction(t *testing.T) {
	t.Parallel()
	var markers string // the children read theirs from KT_KILL_REPRODUCTION: a TempDir of theirs would outlive their SIGKILL
	if !crashtest.IsChild() {
		markers = t.TempDir()
		t.Logf("markers of the kills in the reproduction in %s", markers)
	}
	crashRunOver(t, crashtest.Options{Kills: 5, Points: []stream.ProbePoint{stream.ProbeMetadataWritten},
		Env: []string{"KT_KILL_REPRODUCTION=" + markers}}, "", 2*time.Second)
	if crashtest.IsChild() {
		return
	}
	for _, point := range []string{"written", "committed"} {
		if _, err := os.Stat(filepath.Join(markers, point)); err != nil {
			t.Errorf("no kill in the reproduction at %q: %v", point, err)
		}
	}
}

// killOnceInReproduction makes this process SIGKILL itself at each point
// of a reproduction the first time any run reaches it: a marker file in
// dir, created before the kill, tells the later runs.
func killOnceInReproduction(t *testing.T, dir string) {
	kafka.SetReproduceProbe(func(point string) {
		f, err := os.OpenFile(filepath.Join(dir, point), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return // killed here before, or the marker cannot be made
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	})
}

// TestCrashBeforeCommit kills the job only when a checkpoint is complete
// and nothing is committed yet: the restarted job must commit the
// prepared transactions, not produce their records again.
func TestCrashBeforeCommit(t *testing.T) {
	t.Parallel()
	crashRun(t, crashtest.Options{Kills: crashtesting.Sized(6, 20), Points: []stream.ProbePoint{stream.ProbeMetadataWritten}})
}
