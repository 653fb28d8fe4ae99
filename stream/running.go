package stream

import (
	"context"

	"github.com/exactlyonce/exactly/control"
	"github.com/exactlyonce/exactly/internal/runtime"
)

// Running is a started job ([Job.Start]): wait for its end, read its
// metrics and status, take savepoints, stop it (with a savepoint or
// without). Its methods are safe for concurrent use. It implements
// control.Job, which the control API operates.
type Running struct {
	job *runtime.Job
}

var _ control.Job = (*Running)(nil)

// Wait blocks until the job ends and returns why: nil when its input was
// done and every output committed, or when it was asked to stop
// ([Running.Stop], [Running.StopWithSavepoint], the control API);
// ctx.Err() (joined with the error of a commit that failed while
// stopping, if one did) when the context given to [Job.Start] was
// cancelled; otherwise the error that ended it: a failure no restart can
// fix, the last failure once the restarts ([Options].Restart) are used
// up, or another process taking the job over.
func (r *Running) Wait() error { return r.job.Wait() }

// Stopped reports, once [Running.Wait] returned nil, whether the job ended
// because it was asked to stop ([Running.Stop], [Running.StopWithSavepoint],
// the control API) rather than because its input was done. It blocks
// until the job ends.
func (r *Running) Stopped() bool { return r.job.Stopped() }

// Metrics returns the job's counters, safe to read at any time (see
// package metrics for Prometheus).
func (r *Running) Metrics() *Metrics { return r.job.Metrics() }

// Savepoint takes a savepoint and returns its directory, which
// [Options].RestoreFrom accepts. The job goes on.
func (r *Running) Savepoint(ctx context.Context) (string, error) {
	return r.job.Savepoint(ctx)
}

// StopWithSavepoint takes a savepoint, commits its output and stops the
// job; [Running.Wait] then returns nil. It returns the savepoint's
// directory.
func (r *Running) StopWithSavepoint(ctx context.Context) (string, error) {
	return r.job.StopWithSavepoint(ctx)
}

// Stop stops the job as a cancelled context does: the sinks commit what
// the last completed checkpoint covers and abort the rest; then
// [Running.Wait] returns nil. It returns at once.
func (r *Running) Stop() { r.job.Stop() }

// Status returns what the control API shows of the job now: its state,
// graph, counters, checkpoint history, restarts and lag. Rates are left
// at 0 (the control server computes them from samples).
func (r *Running) Status() control.Status { return r.job.Status() }

// ControlAddr returns the address the control API listens on
// ([Options].Control), "" when the job serves none.
func (r *Running) ControlAddr() string { return r.job.ControlAddr() }
