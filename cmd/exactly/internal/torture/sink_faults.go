package torture

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/exactlyonce/exactly/internal/crashtest"
)

// Process faults made through the sinks' own state, as a user makes them.
const (
	// FaultCommitRejected: a CHECK constraint that every new row violates
	// is added to the fenced-mode PostgreSQL table, so that its commits
	// fail permanently; the job gets SIGTERM soon after (a clean stop whose
	// commit fails, unless a commit while running failed first and stopped
	// the job). A start before the fix must fail with the constraint's
	// error; then the constraint is dropped (the fix) and the next run must
	// commit what the failed commits left pending.
	FaultCommitRejected = "commit-rejected"
	// FaultRerun: with the job stopped, it is started from scratch (an
	// empty checkpoint directory: a new incarnation) over the sinks, which
	// hold the running incarnation's progress; without TakeOverSinks the
	// start must fail with sink.ErrForeignProgress and change nothing in
	// any sink, and the next run, on the job's own directory, goes on.
	FaultRerun = "rerun-from-scratch"
)

// Names and texts of the sink faults.
const (
	// rejectConstraint is the CHECK constraint FaultCommitRejected adds.
	rejectConstraint = "exactly_torture_reject"
	// textForeign is in the error of sink.ErrForeignProgress.
	textForeign = "holds the progress of another incarnation"
)

// commitRejected makes FaultCommitRejected: it adds rejectConstraint to
// the fenced-mode table, waits hold, stops the job with SIGTERM, judges its
// exit, starts it again before the fix (which must fail with the
// constraint's error), and drops the constraint.
func (in *injector) commitRejected(ctx context.Context, child *crashtest.Child, hold time.Duration) error {
	table := pgx.Identifier{in.job.Fenced}.Sanitize()
	if err := in.pgExec("ALTER TABLE " + table + " ADD CONSTRAINT " + rejectConstraint + " CHECK (id < 0) NOT VALID"); err != nil {
		return err
	}
	fix := func() error {
		return in.pgExec("ALTER TABLE " + table + " DROP CONSTRAINT IF EXISTS " + rejectConstraint)
	}
	sleep(ctx, hold)
	_ = child.Process.Signal(syscall.SIGTERM)
	out, exit, hung := waitChild(child, stopBound)
	switch {
	case hung:
		in.fail(fmt.Errorf("%s: the job did not stop within %v of SIGTERM with its commits rejected (stacks dumped, killed)\n%s", FaultCommitRejected, stopBound, in.hangReport(FaultCommitRejected, out)))
		return fix()
	case exit == nil:
		in.outcome(FaultCommitRejected + ": the job finished before a commit met the constraint")
	case strings.Contains(out, textCommitPending):
		in.outcome(FaultCommitRejected + ": clean stop, its commit rejected: ErrCommitPending")
	case strings.Contains(out, rejectConstraint):
		in.outcome(FaultCommitRejected + ": a commit while running was rejected: the job stopped with the permanent error")
	case strings.Contains(out, "context canceled"):
		in.outcome(FaultCommitRejected + ": clean stop before any commit met the constraint")
	default:
		in.fail(fmt.Errorf("%s: the job stopped by SIGTERM with its commits rejected exited with %v\n%s", FaultCommitRejected, exit, tail(out)))
	}
	if exit != nil {
		in.startBeforeFix(child)
	}
	return fix()
}

// startBeforeFix starts the job with its commits still rejected: the start
// must fail with the constraint's error, committing the restored
// checkpoint's output in no sink but those that accept it.
func (in *injector) startBeforeFix(child *crashtest.Child) {
	p, err := startProc(child.Command(context.Background()))
	if err != nil {
		in.fail(fmt.Errorf("%s: starting the job before the fix: %w", FaultCommitRejected, err))
		return
	}
	hung := p.wait(startBound)
	out := p.output()
	switch {
	case hung:
		in.fail(fmt.Errorf("%s: a start before the fix still ran after %v with its commits rejected (stacks dumped, killed)\n%s", FaultCommitRejected, startBound, in.hangReport(FaultCommitRejected, out)))
	case p.err != nil && strings.Contains(out, rejectConstraint):
		in.outcome(FaultCommitRejected + ": a start before the fix failed with the constraint's error")
	case p.err == nil:
		in.outcome(FaultCommitRejected + ": a start before the fix exited 0 (the job had finished)")
	default:
		in.fail(fmt.Errorf("%s: a start before the fix exited with %v, not the constraint's error\n%s", FaultCommitRejected, p.err, tail(out)))
	}
}

// rerun makes FaultRerun: it kills the job, starts it on an empty
// checkpoint directory, which must fail within startBound with
// sink.ErrForeignProgress, and removes that directory. It reports false
// when no sink held committed output yet (the fault is not made: a start
// from scratch then rightly runs).
func (in *injector) rerun(child *crashtest.Child, run int) (bool, error) {
	_ = child.Process.Signal(syscall.SIGKILL)
	<-child.Exited()
	if committed, err := committedFiles(in.job.Files); err != nil || !committed {
		in.outcome(FaultRerun + ": no committed output yet: not made")
		return false, err
	}
	jc := in.job
	jc.Checkpoints = filepath.Join(filepath.Dir(in.progress), fmt.Sprintf("rerun-%d", run))
	defer os.RemoveAll(jc.Checkpoints)
	cfg, err := json.Marshal(jc)
	if err != nil {
		return true, err
	}
	before := in.checkpoints()
	p, err := startProc(child.Command(context.Background(), envJob+"="+string(cfg)))
	if err != nil {
		return true, err
	}
	hung := p.wait(startBound)
	out := p.output()
	switch {
	case hung:
		in.fail(fmt.Errorf("%s: a start from scratch over the sinks still ran after %v (stacks dumped, killed)\n%s", FaultRerun, startBound, in.hangReport(FaultRerun, out)))
	case p.err == nil || !strings.Contains(out, textForeign):
		in.fail(fmt.Errorf("%s: a start from scratch over the sinks exited with %v, not the %q error\n%s", FaultRerun, p.err, textForeign, tail(out)))
	case in.checkpoints() > before:
		in.fail(fmt.Errorf("%s: the refused start from scratch completed checkpoints\n%s", FaultRerun, tail(out)))
	default:
		in.outcome(FaultRerun + ": refused with sink.ErrForeignProgress")
	}
	return true, nil
}

// committedFiles reports whether the file sink's directory holds a
// committed file (pending ones start with a dot).
func committedFiles(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		return false, err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(e.Name(), ".csv") {
			return true, nil
		}
	}
	return false, nil
}

// pgExec runs one statement on the database directly (not through the
// fault proxy), bounded by startBound.
func (in *injector) pgExec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), startBound)
	defer cancel()
	conn, err := pgx.Connect(ctx, in.pg)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}
