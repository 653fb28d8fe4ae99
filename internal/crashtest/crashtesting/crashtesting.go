// Package crashtesting runs a crash run from a test: [Run] re-executes the
// test binary as the child of [crashtest.Supervise].
//
// It is the one part of the crash harness that needs package testing, and
// it lives apart from package crashtest so that the exactly binary, which
// links crashtest for `demo --chaos` and `exactly torture`, does not link
// testing (cmd/exactly's TestBinaryDoesNotLinkTesting checks it). It is a
// package of its own rather than a function in internal/testenv because
// testenv is about the real services a test needs, while this is the crash
// harness's test entry point, next to the harness it drives.
//
//	func TestCrash(t *testing.T) {
//		if crashtest.IsChild() {
//			runTheJob(crashtest.Probe()) // exits 0 when the input is done
//			return
//		}
//		rep := crashtesting.Run(t, crashtest.Options{Kills: 20})
//		verify(t)
//		t.Log(rep)
//	}
package crashtesting

import (
	"context"
	"os/exec"
	"slices"
	"testing"

	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// Run starts the current test in a child process until it finishes
// successfully after at least o.Kills SIGKILLs (see [crashtest.Supervise]).
// It fails the test when a child fails in any other way. Under -short it
// skips the test: a crash run takes seconds to minutes.
func Run(t testing.TB, o crashtest.Options) crashtest.Report {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: a crash test (a child process SIGKILLed again and again)")
	}
	checkSize(t)
	bin := ChildBinary(t)
	command := func(ctx context.Context) *exec.Cmd {
		return exec.CommandContext(ctx, bin, "-test.run=^"+t.Name()+"$", "-test.v=false")
	}
	// The child uses the test's instances of the services, under its
	// locks (held exclusively when the test restarts a service).
	o.Env = append(slices.Clone(o.Env), testenv.ChildEnv(t)...)
	rep, err := crashtest.Supervise(o, command, t.Logf)
	if err != nil {
		t.Fatalf("crashtest: %v", err)
	}
	return rep
}

// RunLive is Run for a job whose input outlasts most of the kill
// schedule: it logs the report and fails the test when fewer than minLive
// kills landed while the job still had input (before a child first
// finished), since kills after the end only test the restore of a
// finished job.
func RunLive(t testing.TB, o crashtest.Options, minLive int) crashtest.Report {
	t.Helper()
	rep := Run(t, o)
	t.Log(rep)
	if rep.KillsBeforeDone < minLive {
		t.Errorf("only %d kills landed while the job still had input, want at least %d: %v", rep.KillsBeforeDone, minLive, rep)
	}
	return rep
}
