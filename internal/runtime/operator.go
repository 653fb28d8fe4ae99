package runtime

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/state"
)

// Emitter receives an operator's output batches. The batch is a []T of the
// operator's output type; the receiver must not keep it after Emit returns.
type Emitter interface {
	Emit(batch any) error
}

// Operator is one subtask of a non-source operator.
//
// Operators may also implement [Snapshotter], [StateRestorer], [CheckpointListener],
// [TimerOperator], [AsyncOperator] and [Closer]; the runtime finds them by
// type assertion.
type Operator interface {
	// Process handles one batch, a []T of the operator's input type. The
	// batch is only valid during the call.
	Process(ctx context.Context, batch any) error
}

// StateRestorer is an operator that restores its state
// (OperatorContext.Restored) in RestoreState rather than in its
// constructor. Once every subtask of an attempt is built, the runtime
// calls RestoreState of up to restoresAtOnce subtasks at a time, so that
// they download and open their state together instead of one after the
// other; no task runs before every subtask restored.
type StateRestorer interface {
	RestoreState(ctx context.Context) error
}

// Snapshotter is an operator with state.
type Snapshotter interface {
	// Snapshot captures the operator's state for checkpoint id. It runs
	// synchronously between two batches and must be cheap; the returned
	// function encodes the captured state and runs on another goroutine
	// while processing continues.
	Snapshot(ctx context.Context, id checkpoint.ID) (func() (checkpoint.SubtaskSnapshot, error), error)
}

// KindSnapshotter is a Snapshotter that snapshots savepoints differently
// from checkpoints (a keyed operator's incremental checkpoints refer to
// shared files; its savepoints must be self-contained). The runtime calls
// SnapshotKind instead of Snapshot, and tells it of completions, which it
// needs to know which uploaded files it may refer to again. Unlike a
// CheckpointListener it commits nothing.
type KindSnapshotter interface {
	// SnapshotKind is Snapshot for a checkpoint or savepoint of kind.
	SnapshotKind(ctx context.Context, id checkpoint.ID, kind checkpoint.Kind) (func() (checkpoint.SubtaskSnapshot, error), error)
	// SnapshotComplete reports that checkpoint id and every lower one are
	// complete.
	SnapshotComplete(id checkpoint.ID)
}

// CheckpointListener is an operator told when checkpoints complete.
type CheckpointListener interface {
	// CheckpointComplete reports that checkpoint id and every lower one are
	// complete. Sinks commit here.
	CheckpointComplete(ctx context.Context, id checkpoint.ID) error
}

// TimerOperator is an operator with processing-time timers.
type TimerOperator interface {
	// NextTimer returns the earliest pending timer.
	NextTimer() (time.Time, bool)
	// FireTimers fires every timer due at now.
	FireTimers(ctx context.Context, now time.Time) error
}

// AsyncOperator is an operator whose work completes off its task's
// goroutine (asynchronous I/O). Its spec sets OwnTask, so that it heads
// its task, which waits on Completions beside its inputs and, when it
// fires, calls EmitCompleted on the task's goroutine.
type AsyncOperator interface {
	// Completions fires when work completed since the last EmitCompleted.
	Completions() <-chan struct{}
	// EmitCompleted emits the results that completed and may be emitted
	// now.
	EmitCompleted(ctx context.Context) error
}

// Closer is an operator that holds resources.
type Closer interface {
	// Close releases the operator's resources. When clean is true the job
	// is stopping deliberately and completed is the last completed
	// checkpoint: sinks commit what it covers and abort the rest. When clean
	// is false the attempt failed; recovery will sort out transactions.
	Close(ctx context.Context, completed checkpoint.ID, clean bool) error
}

// SourceOperator is one subtask of a source.
type SourceOperator interface {
	// Poll emits at most one batch. It returns how many records it emitted
	// and whether every split of this subtask is finished. ctx is also
	// cancelled when the task has mail (a barrier to inject, a commit
	// notice): a blocking read should then return what it has; an error
	// wrapping context.Canceled caused by that cancellation is ignored. Work that must not be
	// interrupted (opening a split) should use a longer-lived context.
	Poll(ctx context.Context) (n int, finished bool, err error)
	Snapshotter
}

// OperatorContext tells an operator subtask where it runs.
type OperatorContext struct {
	// Job is the job's name.
	Job string
	// Operator is the operator's name.
	Operator string
	// Subtask is the subtask index in [0, Parallelism).
	Subtask int
	// Parallelism is the operator's parallelism.
	Parallelism int
	// MaxParallelism is the job's number of key groups.
	MaxParallelism int
	// KeyGroups is the range of key groups this subtask owns (keyed operators).
	KeyGroups state.KeyGroupRange
	// Restored is the state restored for this subtask, nil on a fresh start.
	// Keyed state holds only the owned key groups, and the databases of
	// incremental snapshots whose key groups overlap them; operator entries
	// hold the entries of every former subtask.
	Restored *checkpoint.SubtaskSnapshot
	// SharedFiles is the shared directory of the job's checkpoint storage:
	// keyed operators upload the files of incremental snapshots there and
	// read those of Restored.DBs.
	SharedFiles checkpoint.SharedFiles
	// BatchSize is the preferred number of records per batch.
	BatchSize int
	// CheckpointInterval is the job's checkpoint interval.
	CheckpointInterval time.Duration
	// Records counts the records this subtask handled. The runtime counts
	// the records every operator receives; a source adds the records it
	// read.
	Records *atomic.Int64
	// LateRecords counts the records an event-time operator found too late
	// (behind the watermark), whether it dropped them or sent them to a side
	// output; operators add to it.
	LateRecords *atomic.Int64
	// Commit is how the commit protocol retries and bounds its calls.
	Commit CommitPolicy
	// Owner is this run's incarnation and epoch, for sinks' fencing.
	Owner sink.Owner
	// Logger is annotated with the operator and subtask.
	Logger *slog.Logger
	// SideOutputs are the emitters of the operator's side outputs, one per
	// [OperatorSpec].SideOutputs: SideOutputs[i-1] feeds the edges whose
	// [Input].Output is i. They travel with the main output: barriers,
	// watermarks and the end of the stream reach their consumers too, so a
	// side output is aligned and checkpointed like any edge. One without
	// consumers discards its batches.
	SideOutputs []Emitter
}

// CommitPolicy is how the commit protocol retries and bounds its calls to
// a sink: [Options].CommitRetries and CommitTimeout.
type CommitPolicy struct {
	// Retries is how many times a failed commit is retried.
	Retries int
	// Timeout bounds each call.
	Timeout time.Duration
}

// RestoreContext is what an operator's Restore hook receives.
type RestoreContext struct {
	// Job is the job's name.
	Job string
	// Operator is the operator's name.
	Operator string
	// Checkpoint is the restored checkpoint's id, 0 on a fresh start.
	Checkpoint checkpoint.ID
	// Entries holds the operator entries of every former subtask.
	Entries [][]byte
	// Commit is how the commit protocol retries and bounds its calls.
	Commit CommitPolicy
	// Owner is this run's incarnation and epoch, for sinks' fencing.
	Owner sink.Owner
	// TakeOverSinks is [Options].TakeOverSinks.
	TakeOverSinks bool
	// Logger is annotated with the operator.
	Logger *slog.Logger
}
