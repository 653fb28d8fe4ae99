package testenv

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// TestMain gives the tests locks of their own: the test processes that run
// beside them hold the shared ones.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "testenv-locks")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	lockDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// recorder is a test whose Fatalf ends its goroutine and records the
// message, to check what testenv refuses.
type recorder struct {
	testing.TB
	fatal string
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	panic(r)
}

// fatal runs f with a recorder and returns its Fatalf message, "" if none.
func fatal(t *testing.T, f func(r *recorder)) string {
	r := &recorder{TB: t}
	func() {
		defer func() {
			if p := recover(); p != nil && p != r {
				panic(p)
			}
		}()
		f(r)
	}()
	return r.fatal
}

// TestScriptNeedsExclusive checks that a test cannot restart a service it
// does not hold exclusively: CI saw connections closed "at random" while a
// crash test of another package restarted PostgreSQL under them.
func TestScriptNeedsExclusive(t *testing.T) {
	if parentHoldsLock() {
		t.Skip("runs under a parent's locks")
	}
	msg := fatal(t, func(r *recorder) { _, _ = Script(r, PostgresService, "restart-immediate") })
	if !strings.Contains(msg, "call testenv.Exclusive(t, testenv.PostgresService) first") {
		t.Errorf("Script without the lock: %q, want a message naming Exclusive", msg)
	}
	msg = fatal(t, func(r *recorder) {
		lock(r, KafkaService, syscall.LOCK_SH)
		Exclusive(r, KafkaService)
	})
	if !strings.Contains(msg, "asked for kafka exclusively after using it shared") {
		t.Errorf("Exclusive after a shared use: %q", msg)
	}
}

// TestExclusiveIsPerService checks that holding one service exclusively
// leaves the others to the other tests, in this process and others, when
// there is no faults instance.
func TestExclusiveIsPerService(t *testing.T) {
	if parentHoldsLock() {
		t.Skip("runs under a parent's locks")
	}
	t.Setenv("EXACTLY_FAULTS_POSTGRES_ENV", "")
	t.Run("hold", func(t *testing.T) {
		Exclusive(t, PostgresService)
		for _, s := range services {
			free := tryLock(t, "exactly-"+string(s)+".lock")
			if s == PostgresService && free {
				t.Errorf("a shared lock of %s was granted while a test holds it exclusively", s)
			}
			if s != PostgresService && !free {
				t.Errorf("a shared lock of %s was refused while a test holds only postgres exclusively", s)
			}
		}
		// The test holds the lock: Script runs the script (a refusal
		// would fail the test).
		if out, err := Script(t, PostgresService, "status"); err != nil {
			t.Logf("postgres.sh status: %v, %s (no server: fine here)", err, out)
		}
	})
	if _, ok := held.Load(heldKey{t, PostgresService}); ok {
		t.Error("the parent test holds the lock its subtest took")
	}
}

// TestNoServiceRestartsOutsideTestenv checks that no test runs a
// service's script itself: a test that restarts a service must do it
// through Script or RestartEvery, under Exclusive. Before they existed,
// two crash tests restarted PostgreSQL and the S3 server, and a Kafka test
// the broker, under the other packages' running tests.
func TestNoServiceRestartsOutsideTestenv(t *testing.T) {
	root := filepath.Join("..", "..")
	scripts := regexp.MustCompile(`"(postgres|kafka|s3|toxiproxy)\.sh"|scripts/(postgres|kafka|s3|toxiproxy)\.sh"`)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".tmp" || d.Name() == ".git" || path == filepath.Join(root, "internal", "testenv")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if m := scripts.Find(src); m != nil {
			t.Errorf("%s runs %s itself: use testenv.Script or testenv.RestartEvery under testenv.Exclusive", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestExclusiveTakesTheFaultsInstance checks that a test asking for a
// service exclusively gets its faults instance when there is one, leaving
// the first instance to the other tests, and that its scripts and children
// address the faults instance.
func TestExclusiveTakesTheFaultsInstance(t *testing.T) {
	if parentHoldsLock() {
		t.Skip("runs under a parent's locks")
	}
	t.Setenv("EXACTLY_KAFKA_BROKERS", "127.0.0.1:1")
	t.Setenv("EXACTLY_FAULTS_KAFKA_BROKERS", "127.0.0.1:2")
	t.Setenv("EXACTLY_FAULTS_KAFKA_ENV", "KAFKA_PORT=2 KAFKA_DIR=/faults/kafka")
	t.Setenv("EXACTLY_REQUIRE_SERVICES", "")
	if testing.Short() {
		t.Skip("-short: Kafka skips")
	}
	t.Run("shared", func(t *testing.T) {
		if got := Kafka(t); got != "127.0.0.1:1" {
			t.Errorf("Kafka = %s, want the first instance", got)
		}
	})
	t.Run("exclusive", func(t *testing.T) {
		Exclusive(t, KafkaService)
		if got := Kafka(t); got != "127.0.0.1:2" {
			t.Errorf("Kafka after Exclusive = %s, want the faults instance", got)
		}
		if !tryLock(t, "exactly-kafka.lock") {
			t.Error("the first instance's lock is taken: the other tests would wait")
		}
		if tryLock(t, "exactly-faults-kafka.lock") {
			t.Error("the faults instance's lock is free")
		}
		env := strings.Join(scriptCommand(t, KafkaService, "restart").Env, " ")
		if !strings.HasSuffix(env, "KAFKA_PORT=2 KAFKA_DIR=/faults/kafka") {
			t.Errorf("the script's environment ends %q, want the faults instance's settings", env[max(0, len(env)-80):])
		}
		if got := strings.Join(ChildEnv(t), " "); got != ParentHoldsLock+" "+envFaultsHeld+"=kafka=FAULTS" {
			t.Errorf("ChildEnv = %q", got)
		}
	})
}

// TestExclusiveSpreadsOverTheFaultsInstances checks that with two faults
// instances of a service, a test that restarts it takes the free one while
// another test holds the first, instead of waiting for it.
func TestExclusiveSpreadsOverTheFaultsInstances(t *testing.T) {
	if parentHoldsLock() {
		t.Skip("runs under a parent's locks")
	}
	t.Setenv("EXACTLY_KAFKA_BROKERS", "127.0.0.1:1")
	t.Setenv("EXACTLY_FAULTS_KAFKA_BROKERS", "127.0.0.1:2")
	t.Setenv("EXACTLY_FAULTS_KAFKA_ENV", "KAFKA_PORT=2")
	t.Setenv("EXACTLY_FAULTS2_KAFKA_BROKERS", "127.0.0.1:3")
	t.Setenv("EXACTLY_FAULTS2_KAFKA_ENV", "KAFKA_PORT=3")
	t.Setenv("EXACTLY_REQUIRE_SERVICES", "")
	if testing.Short() {
		t.Skip("-short: Kafka skips")
	}
	t.Run("first", func(t *testing.T) {
		Exclusive(t, KafkaService)
		if got := Kafka(t); got != "127.0.0.1:2" {
			t.Errorf("Kafka = %s, want the first faults instance", got)
		}
		t.Run("second", func(t *testing.T) {
			Exclusive(t, KafkaService)
			if got := Kafka(t); got != "127.0.0.1:3" {
				t.Errorf("Kafka while another test holds the first faults instance = %s, want the second", got)
			}
			if got := strings.Join(ChildEnv(t), " "); got != ParentHoldsLock+" "+envFaultsHeld+"=kafka=FAULTS2" {
				t.Errorf("ChildEnv = %q", got)
			}
			if env := strings.Join(scriptCommand(t, KafkaService, "restart").Env, " "); !strings.HasSuffix(env, " KAFKA_PORT=3") {
				t.Errorf("the script's environment ends %q, want the second instance's settings", env[max(0, len(env)-80):])
			}
		})
	})
}

// TestLockFirstFreeWaitsForAny checks that when every lock file is taken,
// lockFirstFree gets the one released, whichever it is.
func TestLockFirstFreeWaitsForAny(t *testing.T) {
	names := []string{"wait-a.lock", "wait-b.lock"}
	a, i, err := lockFirstFree(names, syscall.LOCK_EX)
	if err != nil || i != 0 {
		t.Fatalf("first lock: index %d, %v; want 0", i, err)
	}
	defer a.Close()
	b, i, err := lockFirstFree(names, syscall.LOCK_EX)
	if err != nil || i != 1 {
		t.Fatalf("second lock: index %d, %v; want 1, the free one", i, err)
	}
	type result struct {
		f   *os.File
		i   int
		err error
	}
	third := make(chan result, 1)
	go func() {
		f, i, err := lockFirstFree(names, syscall.LOCK_EX)
		third <- result{f, i, err}
	}()
	b.Close() // the second is released: the waiting call gets it
	r := <-third
	if r.err != nil || r.i != 1 {
		t.Fatalf("waiting lock: index %d, %v; want 1, the one released", r.i, r.err)
	}
	r.f.Close()
}

// tryLock reports whether a shared lock of the lock file name is free.
func tryLock(t *testing.T, name string) bool {
	f, err := os.OpenFile(filepath.Join(lockDir, name), os.O_CREATE|os.O_RDWR, 0o666)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB) == nil
}
