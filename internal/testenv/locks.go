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
// until it ends. When scripts/test.sh started faults instances of a
// service (more brokers, databases or S3 servers, for the tests that kill
// or restart one), t gets the first of them that is free, or waits for the
// first to become free: it waits only for the other tests that restart the
// service, the tests of the first instance go on, and [Kafka],
// [Postgres], [PostgresTLSCA] and [S3] return the faults instance's
// addresses to t from then on. Otherwise t gets the only instance: it
// waits until no other test (in any process) uses it and makes the others
// wait. Call it before asking for the service's address.
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

// envFaultsHeld lists, in a child's environment, the faults instances its
// parent test holds, as service=instance pairs (comma-separated, such as
// kafka=FAULTS2,postgres=FAULTS).
const envFaultsHeld = "EXACTLY_FAULTS_HELD"

// ChildEnv returns the environment entries for a child process of t (a
// crash test's child) that uses the services t uses, under t's locks.
func ChildEnv(t testing.TB) []string {
	var faults []string
	for _, s := range services {
		if inst := faultsInstance(t, s); inst != "" {
			faults = append(faults, string(s)+"="+inst)
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
	how      int    // LOCK_SH or LOCK_EX
	instance string // the faults instance's prefix (FAULTS, FAULTS2...), "" for the first instance
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

// faultsInstance returns the prefix of the faults instance of s that t
// uses (it holds it, or its parent process does), "" when t uses the first
// instance.
func faultsInstance(t testing.TB, s Service) string {
	if parentHoldsLock() {
		for _, pair := range strings.Split(os.Getenv(envFaultsHeld), ",") {
			if svc, inst, ok := strings.Cut(pair, "="); ok && svc == string(s) {
				return inst
			}
		}
		return ""
	}
	h, ok := held.Load(heldKey{t, s})
	if !ok {
		return ""
	}
	return h.(holding).instance
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
// t ends, unless t holds it already; LOCK_EX takes the lock of a faults
// instance when there is one (the first free one, or the first to become
// free).
func lock(t testing.TB, s Service, how int) {
	t.Helper()
	if parentHoldsLock() {
		return
	}
	key := heldKey{t, s}
	if prev, ok := held.Load(key); ok {
		if prev.(holding).how != how && how == syscall.LOCK_EX {
			t.Fatalf("testenv: the test asked for %s exclusively after using it shared: call testenv.Exclusive first", s)
		}
		return
	}
	h := holding{how: how}
	names := []string{"exactly-" + string(s) + ".lock"}
	instances := faultsInstances(s)
	if how == syscall.LOCK_EX && len(instances) > 0 {
		names = names[:0]
		for _, inst := range instances {
			names = append(names, "exactly-"+strings.ToLower(inst)+"-"+string(s)+".lock")
		}
	}
	f, i, err := lockFirstFree(names, how)
	if err != nil {
		t.Fatalf("testenv: %s lock: %v", s, err)
	}
	if how == syscall.LOCK_EX && len(instances) > 0 {
		h.instance = instances[i]
	}
	held.Store(key, h)
	t.Cleanup(func() {
		_ = f.Close()
		held.Delete(key)
	})
}

// lockFirstFree locks (how is LOCK_SH or LOCK_EX) the first of the lock
// files named that is free, or else the first to become free, and returns
// it open (closing it unlocks it) with its index in names.
func lockFirstFree(names []string, how int) (*os.File, int, error) {
	files := make([]*os.File, len(names))
	closeAll := func() {
		for _, f := range files {
			if f != nil {
				_ = f.Close()
			}
		}
	}
	for i, name := range names {
		f, err := os.OpenFile(filepath.Join(lockDir, name), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			closeAll()
			return nil, 0, err
		}
		files[i] = f
	}
	keep := func(i int) (*os.File, int, error) {
		for j, f := range files {
			if j != i {
				_ = f.Close()
			}
		}
		return files[i], i, nil
	}
	for i, f := range files {
		err := syscall.Flock(int(f.Fd()), how|syscall.LOCK_NB)
		if err == nil {
			return keep(i)
		}
		if err != syscall.EWOULDBLOCK {
			closeAll()
			return nil, 0, err
		}
	}
	if len(files) == 1 {
		if err := syscall.Flock(int(files[0].Fd()), how); err != nil {
			closeAll()
			return nil, 0, err
		}
		return files[0], 0, nil
	}
	// All are taken: wait for each at once and keep the first granted. The
	// others are unlocked as soon as they are granted (a waiting flock
	// cannot be called off), and their files closed only then.
	type granted struct {
		i   int
		err error
	}
	grants := make(chan granted, len(files))
	for i, f := range files {
		go func() { grants <- granted{i, syscall.Flock(int(f.Fd()), how)} }()
	}
	first := <-grants
	go func() {
		for range len(files) - 1 {
			g := <-grants
			_ = files[g.i].Close()
		}
	}()
	if first.err != nil {
		_ = files[first.i].Close()
		return nil, 0, first.err
	}
	return files[first.i], first.i, nil
}
