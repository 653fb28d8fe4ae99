package postgres

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint/store"
	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/internal/crashtest/crashtesting"
	"github.com/exactlyonce/exactly/internal/s3test"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// envMachinesDir passes the directory under which each child process of
// TestCrashOnObjectStorage makes its own "machine".
const envMachinesDir = "EXACTLY_PG_CRASH_MACHINES"

const (
	s3RestartEvery = 2 * time.Second
	minS3Restarts  = 3
)

// TestCrashOnObjectStorage: the job keeps its checkpoints on S3 only, its
// keyed state in the Pebble backend. Each process runs on a new
// "machine": it starts in a fresh, empty working directory, and the
// previous process's directory is deleted (a lost disk). The processes are
// SIGKILLed at least 12 times, and the S3 server is SIGKILLed and
// restarted every s3RestartEvery meanwhile; the tables must equal a
// failure-free run's, restored from S3 alone, and no object on S3 may be
// left that no retained checkpoint refers to.
func TestCrashOnObjectStorage(t *testing.T) {
	crashOnObjectStorage(t, "pgcrash_s3", false)
}

// TestCrashOnObjectStorageTLS is TestCrashOnObjectStorage with every
// connection secured: the checkpoints on the S3 server's HTTPS endpoint
// (its CA in AWS_CA_BUNDLE), the sinks logged in as PostgreSQL's TLS-only
// role with sslmode=verify-full; without the S3 server's restarts.
func TestCrashOnObjectStorageTLS(t *testing.T) {
	crashOnObjectStorage(t, "pgcrash_s3_tls", true)
}

func crashOnObjectStorage(t *testing.T, name string, secured bool) {
	dsn := testenv.Postgres
	if secured {
		dsn = verifyFullDSN
	}
	if crashtest.IsChild() {
		machines := os.Getenv(envMachinesDir)
		previous, _ := filepath.Glob(filepath.Join(machines, "machine-*"))
		for _, dir := range previous {
			if err := os.RemoveAll(dir); err != nil { // the old machine's disk is gone
				t.Fatal(err)
			}
		}
		here, err := os.MkdirTemp(machines, "machine-")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chdir(here); err != nil {
			t.Fatal(err)
		}
		opts := stream.Options{
			CheckpointDir:      os.Getenv(envCrashDir),
			CheckpointInterval: 50 * time.Millisecond,
			CommitRetries:      6,
			// A killed owner is taken over once its lease passes: keep it short.
			OwnershipLease: time.Second,
			Restart:        stream.RestartStrategy{MaxAttempts: 100, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 500 * time.Millisecond},
			Probe:          crashtest.Probe(),
		}
		j := crashJob(t, name, Fenced, dsn(t))
		// The keyed state on disk, on this machine's disk: each process
		// restores it from S3 alone.
		j.SetStateBackend(state.BackendConfig{Kind: state.PebbleBackend, Dir: filepath.Join(here, "state")})
		if err := j.Run(context.Background(), opts); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !secured {
		testenv.Exclusive(t, testenv.S3Service) // the S3 server restarts under it
	}
	_ = testenv.S3(t) // skips without the S3 server before anything is set up
	conn := db(t)
	dropTables(t, conn, append(sinkKeys(name+"_events", name, "events"), sinkKeys(name+"_totals", name, "latest")...), name+"_events", name+"_totals")
	forgetSinks(t, conn, "public", name+"_events", name, "events")
	forgetSinks(t, conn, "public", name+"_totals", name, "latest")
	location := s3test.Location(t, "pgcrash")
	if secured {
		location = s3test.LocationTLS(t, "pgcrash")
	}

	// Over TLS the shared S3 server (the faults instances serve no HTTPS)
	// is not restarted: the test is of the secured connections.
	stopRestarts := func() int { return -1 }
	if !secured {
		stopRestarts = testenv.RestartEvery(t, testenv.S3Service, s3RestartEvery, "kill", "start")
	}
	kills := crashtesting.Sized(12, 40)
	if secured {
		kills = crashtesting.Sized(6, 40) // the same run: fewer kills in the test command
	}
	rep := crashtesting.Run(t, crashtest.Options{Kills: kills, MaxDelay: 1500 * time.Millisecond,
		Env: []string{envCrashDir + "=" + location, envMachinesDir + "=" + t.TempDir()}})
	restarts := stopRestarts()
	t.Log(rep)
	if restarts >= 0 {
		t.Logf("S3 server SIGKILLs and restarts during the run: %d", restarts)
	}
	if restarts >= 0 && restarts < minS3Restarts {
		t.Errorf("only %d S3 server restarts happened during the run, want at least %d", restarts, minS3Restarts)
	}
	st, err := store.OpenStorage(location, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	latest, err := st.Latest()
	if err != nil || latest == nil {
		t.Fatalf("latest checkpoint on S3 after the run: %+v, %v; want the final one", latest, err)
	}
	t.Logf("latest checkpoint on S3: %d", latest.ID)
	checkCrashTables(t, conn, name, Fenced)
	obj, err := store.OpenObject(location, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	orphans, err := obj.Unreferenced()
	if err != nil {
		t.Fatal(err)
	}
	if len(orphans) > 0 {
		t.Errorf("%d objects on S3 that no retained checkpoint refers to after the job ended, e.g. %s", len(orphans), orphans[0])
	}
}
