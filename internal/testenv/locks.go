package testenv

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// Exclusive gives t the services named (all of them if none is) to itself
// until it ends. When scripts/test.sh started a faults instance of a
// service (a second broker, database or S3 server, for the tests that kill
// or restart one), t gets that instance: it waits only for the other tests
// that restart the service, the tests of the first instance go on, and
// [Kafka], [Postgres], [PostgresTLSCA] and [S3] return the faults
// instance's addresses to t from then on. Otherwise t gets the only
// instance: it waits until no other test (in any process) uses it and
// makes the others wait. Call it before asking for the service's address.
func Exclusive(t testing.TB, which ...Service) {
	t.Helper()
	if len(which) == 0 {
		which = services
	}
	// In the order of services, so that two tests asking for two services
	// each never wait for each other.
	for _, s := range services {
		if slices.Contains(which, s) {
			lock(t, s, syscall.LOCK_EX)
		}
	}
}

// ParentHoldsLock is the environment entry a test that holds the services'
// locks passes to the child processes it runs (crash tests): they use the
// services under the parent's locks instead of waiting for them, which
// would wait forever for a lock held exclusively. [ChildEnv] returns it
// with the instances the parent uses.
const ParentHoldsLock = "EXACTLY_SERVICES_LOCK_HELD_BY_PARENT=1"

// envFaultsHeld lists, in a child's environment, the services whose faults
// instances its parent test holds (comma-separated).
const envFaultsHeld = "EXACTLY_FAULTS_HELD"

// ChildEnv returns the environment entries for a child process of t (a
// crash test's child) that uses the services t uses, under t's locks.
func ChildEnv(t testing.TB) []string {
	var faults []string
	for _, s := range services {
		if usesFaults(t, s) {
			faults = append(faults, string(s))
		}
	}
	return []string{ParentHoldsLock, envFaultsHeld + "=" + strings.Join(faults, ",")}
}

// parentHoldsLock reports whether this process is a child that uses the
// services under its parent's locks.
func parentHoldsLock() bool {
	k, v, _ := strings.Cut(ParentHoldsLock, "=")
	return os.Getenv(k) == v
}

// holding is how a test holds a service.
type holding struct {
	how    int  // LOCK_SH or LOCK_EX
	faults bool // the faults instance
}

// lockDir is the directory of the lock files, shared by every test
// process; testenv's own tests use a private one.
var lockDir = os.TempDir()

// heldKey is a test and a service whose lock it holds.
type heldKey struct {
	t testing.TB
	s Service
}

// held records, by heldKey, the holding of each test, so that a test
// asking for a service twice locks once (a second lock on another
// descriptor of the same file would wait for the first).
var held sync.Map

// usesFaults reports whether t uses the faults instance of s: it holds it,
// or its parent process does.
func usesFaults(t testing.TB, s Service) bool {
	if parentHoldsLock() {
		return slices.Contains(strings.Split(os.Getenv(envFaultsHeld), ","), string(s))
	}
	h, ok := held.Load(heldKey{t, s})
	return ok && h.(holding).faults
}

// exclusive reports whether t holds s exclusively, itself or through its
// parent process.
func exclusive(t testing.TB, s Service) bool {
	if parentHoldsLock() {
		return true
	}
	h, ok := held.Load(heldKey{t, s})
	return ok && h.(holding).how == syscall.LOCK_EX
}

// lock takes the lock of service s for t (how is LOCK_SH or LOCK_EX) until
// t ends, unless t holds it already; LOCK_EX takes the faults instance's
// lock when there is one.
func lock(t testing.TB, s Service, how int) {
	t.Helper()
	if parentHoldsLock() {
		return
	}
	key := heldKey{t, s}
	h := holding{how: how, faults: how == syscall.LOCK_EX && hasFaultsInstance(s)}
	if prev, ok := held.LoadOrStore(key, h); ok {
		if prev.(holding).how != how && how == syscall.LOCK_EX {
			t.Fatalf("testenv: the test asked for %s exclusively after using it shared: call testenv.Exclusive first", s)
		}
		return
	}
	name := "exactly-" + string(s) + ".lock"
	if h.faults {
		name = "exactly-faults-" + string(s) + ".lock"
	}
	f, err := os.OpenFile(filepath.Join(lockDir, name), os.O_CREATE|os.O_RDWR, 0o666)
	if err == nil {
		if err = syscall.Flock(int(f.Fd()), how); err != nil {
			_ = f.Close()
		}
	}
	if err != nil {
		held.Delete(key)
		t.Fatalf("testenv: %s lock: %v", s, err)
	}
	t.Cleanup(func() {
		_ = f.Close()
		held.Delete(key)
	})
}
