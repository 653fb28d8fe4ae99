package coordinator

import (
	"cmp"
	"fmt"
	"time"
)

// RecoveryConfig is the restart policy of [Recovery].
type RecoveryConfig struct {
	// MaxAttempts is the number of restarts allowed without a checkpoint
	// completing in between; negative disables restarts.
	MaxAttempts int
	// MaxAttemptsOption names the option that sets MaxAttempts, for the
	// reason given when the restarts are used up.
	MaxAttemptsOption string
	// InitialBackoff is the wait before the first restart; it doubles with
	// every further restart, up to MaxBackoff.
	InitialBackoff, MaxBackoff time.Duration
}

// Failure classifies why an attempt ended; the driver, which sees the error
// values, classifies.
type Failure int

const (
	// Succeeded: the attempt ran the job to its end and committed.
	Succeeded Failure = iota
	// Transient: a failure a restart may fix (a lost connection, a timeout).
	Transient
	// Permanent: a failure no restart fixes — corrupt checkpoint data, a
	// checkpoint that does not fit the job, a sink error marked permanent.
	Permanent
	// Fenced: another process took the job over; this one is a zombie.
	Fenced
	// Stopped: the user stopped the job (its context ended).
	Stopped
)

var failureNames = [...]string{"succeeded", "transient", "permanent", "fenced", "stopped"}

func (f Failure) String() string {
	if int(f) < len(failureNames) {
		return failureNames[f]
	}
	return fmt.Sprintf("failure(%d)", int(f))
}

// AttemptEnd is what the driver reports when an attempt ends.
type AttemptEnd struct {
	// Failure says how it ended.
	Failure Failure
	// Checkpointed: a checkpoint completed during the attempt.
	Checkpointed bool
	// Final: a final checkpoint (end of input, or stop with savepoint)
	// completed: nothing is left to run, only its commits.
	Final bool
	// OutcomeUnknown: a checkpoint newer than the last completed one may
	// be complete in storage (its metadata write failed).
	OutcomeUnknown bool
	// CommitPending: the output of the last completed checkpoint could not
	// be committed while stopping (it is safe in the checkpoint).
	CommitPending bool
}

// RestoreFrom says which checkpoint the next attempt restores.
type RestoreFrom int

const (
	// RestoreSame restores what the ended attempt restored.
	RestoreSame RestoreFrom = iota
	// RestoreCompleted restores the last checkpoint the ended attempt
	// completed.
	RestoreCompleted
	// RestoreLatestInStorage reads the storage: a checkpoint whose outcome
	// is unknown may have completed there.
	RestoreLatestInStorage
)

var restoreNames = [...]string{"same", "completed", "latest-in-storage"}

func (r RestoreFrom) String() string { return restoreNames[r] }

// Decision is what [Recovery] asks the driver to do after an attempt.
type Decision struct {
	// Restart is true to run another attempt after Backoff; false ends the
	// job with Reason (empty when it succeeded).
	Restart bool
	// Backoff is the wait before the restart.
	Backoff time.Duration
	// Restore is what the restart restores.
	Restore RestoreFrom
	// CommitOnly: the restart only commits what the restored checkpoint
	// covers; the job runs nothing again.
	CommitOnly bool
	// Attempt counts the restarts since the last completed checkpoint.
	Attempt int
	// Reason says why the job ends, or why it restarts.
	Reason string
}

func (d Decision) String() string {
	if !d.Restart {
		return fmt.Sprintf("end reason=%q", d.Reason)
	}
	return fmt.Sprintf("restart attempt=%d backoff=%v restore=%s commit-only=%t", d.Attempt, d.Backoff, d.Restore, d.CommitOnly)
}

// Recovery is the pure recovery decision of a job, in the style of the
// [Coordinator]: after each attempt the driver reports how it ended, and
// Recovery decides whether to restart, after how long, from which
// checkpoint, and whether anything is left to run. It reads no clock and
// does no I/O.
type Recovery struct {
	cfg        RecoveryConfig
	failures   int  // restarts since a checkpoint completed
	commitOnly bool // a final checkpoint completed: only its commits are left
}

// NewRecovery returns the recovery decision of a job that starts. finished
// is true when the job restores its final checkpoint (its input ended) and
// is not asked to run on: the first attempt only commits.
func NewRecovery(cfg RecoveryConfig, finished bool) *Recovery {
	return &Recovery{cfg: cfg, commitOnly: finished}
}

// CommitOnly reports whether the next attempt only commits what its
// restored checkpoint covers.
func (r *Recovery) CommitOnly() bool { return r.commitOnly }

// AttemptEnded decides what follows an attempt.
func (r *Recovery) AttemptEnded(a AttemptEnd) Decision {
	switch a.Failure {
	case Succeeded:
		return Decision{}
	case Stopped:
		if a.CommitPending {
			return Decision{Reason: "stopped; the last checkpoint's output is safe and is committed at the next start"}
		}
		return Decision{Reason: "stopped"}
	case Fenced:
		return Decision{Reason: "fenced: another process owns the job"}
	case Permanent:
		return Decision{Reason: "a permanent failure: restarting cannot fix it"}
	}
	if a.Checkpointed {
		r.failures = 0
	}
	r.failures++
	if r.cfg.MaxAttempts < 0 {
		return Decision{Reason: "restarts are disabled"}
	}
	if r.failures > r.cfg.MaxAttempts {
		return Decision{Reason: fmt.Sprintf("%d restarts without a completed checkpoint, the most allowed (%s)", r.cfg.MaxAttempts, cmp.Or(r.cfg.MaxAttemptsOption, "Restart.MaxAttempts"))}
	}
	backoff := r.cfg.InitialBackoff << min(r.failures-1, 30)
	if backoff > r.cfg.MaxBackoff || backoff <= 0 {
		backoff = r.cfg.MaxBackoff
	}
	d := Decision{Restart: true, Backoff: backoff, Attempt: r.failures, Reason: "a transient failure"}
	if a.Checkpointed {
		d.Restore = RestoreCompleted
	}
	if a.OutcomeUnknown {
		d.Restore = RestoreLatestInStorage
	}
	r.commitOnly = r.commitOnly || a.Final
	d.CommitOnly = r.commitOnly
	return d
}
