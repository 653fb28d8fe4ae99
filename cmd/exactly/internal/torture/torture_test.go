package torture

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/internal/crashtest/crashtesting"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestTorture is the CI-sized torture run: at least 30 faults of every
// kind against the real services (it restarts them, so it holds them
// exclusively), then the strict check of every sink. EXACTLY_TORTURE_SEED
// replays a run.
func TestTorture(t *testing.T) {
	tortureTest(t, crashtesting.Sized(32, 100), nil, func(c *Config) []string {
		c.NoDisk = os.Geteuid() != 0
		if !c.NoDisk {
			return []string{FaultUnwritable}
		}
		return nil
	})
}

// TestTortureObjectStorage is TestTorture with the job's checkpoints on
// the S3 server, through toxiproxy, and the object-storage faults (server
// SIGKILL and restart, uploads slower than the checkpoint timeout, and the
// network faults on the S3 connections) instead of the checkpoint
// directory's; the keyed state is in the Pebble backend, whose directory
// a fault wipes.
func TestTortureObjectStorage(t *testing.T) {
	tortureTest(t, crashtesting.Sized(24, 100), []testenv.Service{testenv.S3Service}, func(c *Config) []string {
		c.S3, c.NoDisk, c.Pebble = testenv.S3(t), true, true
		return []string{FaultS3Restart, FaultSlowUpload, FaultStateWiped}
	})
}

// TestTortureInstances is the CI-sized cluster torture run: the torture
// job as a cluster job (cluster.RunJob, three stages) on three instance
// processes, its checkpoints on the S3 server and its state in Pebble,
// with every kind of instance fault (kills, protocol-point kills, a
// zombie, clean leaves, a join, two kills at once, a wiped working
// directory) mixed with the service, network and object-storage faults,
// then the strict check of every sink.
func TestTortureInstances(t *testing.T) {
	tortureTest(t, 0, []testenv.Service{testenv.S3Service}, func(c *Config) []string {
		c.Instances, c.S3, c.NoDisk, c.Pebble = 3, testenv.S3(t), true, true
		c.Events, c.Keys, c.Rate = 20_000, 200, 60
		return []string{FaultS3Restart, FaultSlowUpload}
	})
}

// tortureTest runs a torture run of at least faults faults, configured by
// configure, which returns the fault kinds it adds to those every run
// must make. It holds the broker, PostgreSQL, toxiproxy and the services
// named exclusively: their faults instances under scripts/test.sh.
func tortureTest(t *testing.T, faults int, services []testenv.Service, configure func(*Config) []string) {
	if IsChild() {
		if err := RunChild(context.Background()); err != nil {
			t.Fatal(err)
		}
		return
	}
	if testing.Short() {
		t.Skip("the torture run takes minutes")
	}
	testenv.Exclusive(t, append([]testenv.Service{testenv.KafkaService, testenv.PostgresService, testenv.ToxiproxyService}, services...)...)
	testenv.UseScriptEnv(t) // the suite restarts the services with scripts/
	c := Config{
		Workload: Workload{Events: 30_000, Keys: 200, Seed: uint64(time.Now().UnixNano())},
		Faults:   faults, Kafka: testenv.Kafka(t), Postgres: testenv.Postgres(t), Toxiproxy: testenv.Toxiproxy(t),
		Rate: 400, Dir: t.TempDir(), Logf: t.Logf,
	}
	added := configure(&c)
	want := []string{FaultKafkaRestart, FaultPostgresRestart, FaultLatency, FaultReset, FaultTimeout, FaultPartition}
	if c.Instances > 0 {
		want = append(want, instanceKinds()...)
	} else {
		want = append(want, "kill:", FaultCleanStop, FaultSecondInstance, FaultZombie, FaultCorrupt, FaultStuckWrite, FaultCommitRejected, FaultRerun, FaultTxnOutage)
	}
	want = append(want, added...)
	if s := os.Getenv("EXACTLY_TORTURE_SEED"); s != "" {
		var err error
		if c.Seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatal(err)
		}
	}
	// The job's processes run without -race: the checker judges them by
	// the output they commit (crashtesting.ChildBinary).
	bin := crashtesting.ChildBinary(t)
	command := func(ctx context.Context) *exec.Cmd {
		return exec.CommandContext(ctx, bin, "-test.run=^"+t.Name()+"$", "-test.v=false")
	}
	rep, err := Run(context.Background(), c, command)
	if rep != nil {
		var b strings.Builder
		rep.Print(&b)
		t.Log("\n" + b.String())
	}
	if err != nil {
		t.Fatal(err)
	}
	if n := rep.Anomalies(); n > 0 {
		t.Errorf("%d anomalies (replay with EXACTLY_TORTURE_SEED=%d)", n, c.Seed)
	}
	if n := rep.TotalFaults(); n < c.Faults {
		t.Errorf("%d faults injected, want at least %d", n, c.Faults)
	}
	for _, kind := range want {
		found := false
		for k := range rep.Faults {
			found = found || strings.HasPrefix(k, kind)
		}
		if !found {
			t.Errorf("no fault of kind %s injected", kind)
		}
	}
}
