package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// faultsEnv returns the settings scripts/test.sh started the faults
// instance inst of s with (EXACTLY_<inst>_<S>_ENV: VAR=value words, such as
// KAFKA_PORT=29192 KAFKA_DIR=...), nil if it started none.
func faultsEnv(inst string, s Service) []string {
	return strings.Fields(os.Getenv("EXACTLY_" + inst + "_" + strings.ToUpper(string(s)) + "_ENV"))
}

// faultsInstances returns the prefixes of the faults instances of s that
// scripts/test.sh started: FAULTS, then FAULTS2, FAULTS3... while there is
// one.
func faultsInstances(s Service) []string {
	var instances []string
	for n := 1; ; n++ {
		inst := "FAULTS"
		if n > 1 {
			inst += strconv.Itoa(n)
		}
		if len(faultsEnv(inst, s)) == 0 {
			return instances
		}
		instances = append(instances, inst)
	}
}

// scriptEnv returns the settings that address the instance of s that t
// uses to its script: the faults instance's, or none.
func scriptEnv(t testing.TB, s Service) []string {
	if inst := faultsInstance(t, s); inst != "" {
		return faultsEnv(inst, s)
	}
	return nil
}

// Script runs scripts/<s>.sh with args (such as "restart") on the instance
// of s that t uses, and returns its combined output. The test must hold s
// exclusively ([Exclusive]): a test that stops or restarts a service other
// tests are using makes them fail.
func Script(t testing.TB, s Service, args ...string) ([]byte, error) {
	t.Helper()
	if !exclusive(t, s) {
		t.Fatalf("testenv: %s.sh %s: the test does not hold %s exclusively: call testenv.Exclusive(t, testenv.%s) first", s, strings.Join(args, " "), s, serviceConst(s))
	}
	return scriptCommand(t, s, args...).CombinedOutput()
}

// scriptCommand returns the command of scripts/<s>.sh args on t's
// instance of s.
func scriptCommand(t testing.TB, s Service, args ...string) *exec.Cmd {
	cmd := exec.Command(ScriptPath(s), args...)
	cmd.Env = append(os.Environ(), scriptEnv(t, s)...)
	return cmd
}

// UseScriptEnv sets, for the rest of t, the process environment that
// addresses the faults instances t holds to their scripts, for code under
// test that runs scripts/kafka.sh, postgres.sh or s3.sh itself (the torture
// suite). t must not be parallel (testing.T.Setenv).
func UseScriptEnv(t testing.TB) {
	t.Helper()
	for _, s := range services {
		for _, kv := range scriptEnv(t, s) {
			k, v, _ := strings.Cut(kv, "=")
			t.Setenv(k, v)
		}
	}
}

// ScriptPath is the absolute path of scripts/<s>.sh.
func ScriptPath(s Service) string {
	return filepath.Join(repoRoot(), "scripts", string(s)+".sh")
}

// repoRoot returns the repository's root: from this file's path, when
// the build recorded it (not under -trimpath, which scripts/test.sh uses
// so that clones share the build cache), else the nearest directory with
// a go.mod above the working directory (a test's is its package's).
func repoRoot() string {
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		return filepath.Join(filepath.Dir(file), "..", "..") // internal/testenv/scripts.go
	}
	wd, err := os.Getwd()
	if err != nil {
		return "."
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return wd
		}
	}
}

// serviceConst names s's constant, for messages.
func serviceConst(s Service) string {
	switch s {
	case PostgresService:
		return "PostgresService"
	case KafkaService:
		return "KafkaService"
	case S3Service:
		return "S3Service"
	}
	return "ToxiproxyService"
}

// RestartEvery runs scripts/<s>.sh with each of commands in turn (such as
// "restart-immediate", or "kill" then "start") every interval, on the
// instance of s that t uses, until the returned stop is called; stop waits
// for a restart in progress and returns the number of restarts made. The
// test must hold s exclusively.
func RestartEvery(t testing.TB, s Service, every time.Duration, commands ...string) (stop func() int) {
	t.Helper()
	if out, err := Script(t, s, "status"); err != nil {
		t.Fatalf("testenv: %s.sh status: %v: the service is not running\n%s", s, err, out)
	}
	done := make(chan struct{})
	restarts := 0
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(every):
			}
			for _, cmd := range commands {
				if out, err := scriptCommand(t, s, cmd).CombinedOutput(); err != nil {
					t.Errorf("testenv: %s.sh %s: %v\n%s", s, cmd, err, out)
					return
				}
			}
			restarts++
		}
	})
	return func() int {
		close(done)
		wg.Wait()
		return restarts
	}
}
