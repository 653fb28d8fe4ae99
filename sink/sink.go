// Package sink defines the two-phase-commit contract between the engine and
// every exactly-once sink. The engine's half (the sink operator, the queue
// of pending committables, restore-time commits) is package internal/commit.
//
// # The contract
//
// A sink is split in two halves. A [Writer] lives inside one parallel subtask of
// the job: it receives batches and writes them into an open transaction. When a
// checkpoint barrier reaches the subtask, the engine calls [Writer.Prepare]: the
// open transaction must become durable but stay invisible, and Prepare returns a
// small serialized description of it, the committable. The engine stores the
// committable in the checkpoint.
//
// A [Committer] makes prepared transactions visible. The engine calls
// [Committer.Commit] only after the checkpoint that holds the committable has
// completed (its metadata is durable). A higher completed checkpoint subsumes
// lower ones: every pending committable with a checkpoint id at or below it is
// committed, in checkpoint order.
//
// A committable prepared at a checkpoint that was then aborted is not lost
// and not aborted: the engine keeps it pending and stores it again in every
// later checkpoint until one completes, and commits it then. This is correct
// because its records precede the next checkpoint's source positions.
//
// Checkpoint ids start at 1 and never repeat for a job, across restarts and
// when a job is restored from a savepoint into another checkpoint directory
// (the new ids continue above the restored one), so a sink may recognise
// committed transactions by (sink, subtask, checkpoint id).
//
// # Ordering rules the engine keeps
//
//  1. Prepare returns before the subtask acknowledges the checkpoint.
//  2. Commit is called only for committables covered by a completed checkpoint.
//  3. On recovery from checkpoint M, every committable stored in M is committed
//     (again, perhaps) before any new record is written, and only then is
//     AbortLingering(M) called, once per sink, to remove every other trace of
//     earlier attempts: open transactions and transactions prepared for
//     checkpoints that never completed.
//  4. Commit may be called more than once for the same committable (a crash
//     after Commit but before the engine recorded it, a retry after a timeout).
//     It must then succeed without making the data visible twice.
//  5. On every start, before anything is committed, the engine calls
//     [Committer.Fence] once per sink with the process's [Owner]. From then
//     on no committer of an older owner can make anything visible.
//
// # Owners: incarnation and epoch
//
// A job's checkpoint storage is created once and gets a random incarnation
// id; every process that takes ownership of it gets an epoch higher than
// every earlier owner's ([Owner]). Checkpoint ids are comparable only within
// one incarnation: a rerun of "the same" job with empty checkpoint storage
// starts again at 1, so a sink that decides "already committed" from a
// checkpoint id must record the incarnation next to it and compare ids only
// when the incarnations are equal ([Committable.Incarnation] is the
// incarnation that prepared the transaction).
//
// The epoch fences zombies: a process paused past its ownership lease, or an
// old instance still running after a new one took over. Fence records the
// new owner in the sink; every Commit checks, in the same transaction that
// makes its data visible, that its owner is still the sink's owner, and
// fails with an error wrapping [ErrFenced] otherwise.
//
// docs/sinks.md walks through the failure cases for connector authors.
package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
)

// Writer writes one subtask's records into an open transaction.
// A Writer is used by one goroutine at a time.
type Writer[T any] interface {
	// Write adds a batch to the open transaction. The batch slice is only
	// valid during the call; copy what must be kept.
	Write(ctx context.Context, batch []T) error
	// Prepare makes the open transaction durable but invisible at the
	// barrier of checkpoint id and returns its committable, or nil when
	// nothing was written since the last Prepare. The next Write opens a
	// new transaction.
	Prepare(ctx context.Context, id checkpoint.ID) ([]byte, error)
	// Close releases resources. It neither commits nor aborts prepared
	// transactions; an open, unprepared transaction may be discarded.
	Close() error
}

// WatermarkWriter is a [Writer] told the event time of its input: a sink
// that carries watermarks to a downstream job (a Kafka topic between two
// stages, kafka.SinkOptions.Watermarks) writes them into its
// transactions. The engine calls it from the goroutine that writes.
type WatermarkWriter interface {
	// Watermark reports that the writer's input watermark advanced to wm
	// (nanoseconds since the Unix epoch), or that an idle input is active
	// again at wm: no record at or before wm follows.
	Watermark(wm int64)
	// Idle reports that the writer's input became idle: its watermark does
	// not advance until the next Watermark call, and consumers should not
	// wait for it.
	Idle()
}

// Committer makes prepared transactions visible or removes them.
// A Committer is used by one goroutine at a time.
type Committer interface {
	// Commit makes the transaction described by c visible. It must be
	// idempotent: committing an already committed committable succeeds and
	// changes nothing. Errors marked with [Permanent] stop the job; other
	// errors are retried with backoff.
	Commit(ctx context.Context, c Committable) error
	// Abort discards a prepared transaction that no completed checkpoint
	// covers. The engine calls it only when the job stops deliberately
	// (cancellation, stop with savepoint, end of input), for committables
	// newer than the last completed checkpoint; their records will be
	// replayed by the next run. Aborting an unknown or already aborted
	// transaction succeeds.
	Abort(ctx context.Context, c Committable) error
	// Fence makes this committer's owner ([CommitterInfo].Owner) the owner
	// of the sink, before the engine commits anything of the restored
	// checkpoint id (0 when the job starts without one).
	// After Fence returns, Commit and Abort by a committer of an older
	// owner — a lower epoch of the same incarnation — fail with an error
	// wrapping [ErrFenced] and change nothing. Fence itself fails with
	// [ErrFenced] when the sink already records a newer owner.
	//
	// A sink that records progress by checkpoint id and finds the progress
	// of another incarnation fails with an error wrapping
	// [ErrForeignProgress] when id is 0 (a fresh start
	// over another run's output), unless [CommitterInfo].TakeOver is set;
	// restored from a checkpoint or savepoint of another incarnation, it
	// takes the sink over. Fencing is idempotent: fencing twice with the
	// same owner succeeds.
	Fence(ctx context.Context, id checkpoint.ID) error
	// AbortLingering removes every transaction of this sink left behind by
	// earlier attempts of the job, for every subtask that ever existed,
	// after the committables of the restored checkpoint id (0 when the job
	// starts fresh) have been committed.
	AbortLingering(ctx context.Context, id checkpoint.ID) error
	// Close releases resources.
	Close() error
}

// Committable is a prepared transaction as the engine stores it.
type Committable struct {
	// Checkpoint is the checkpoint at whose barrier the transaction was prepared.
	Checkpoint checkpoint.ID
	// Subtask is the index of the writer subtask that prepared it.
	Subtask int
	// Incarnation is the incarnation of the job's checkpoint storage whose
	// owner prepared it (see [Owner]); empty in checkpoints written before
	// incarnations existed.
	Incarnation string
	// Data is what [Writer.Prepare] returned.
	Data []byte
}

// WriterInfo tells a writer where it runs.
type WriterInfo struct {
	// Job is the job's name, stable across restarts.
	Job string
	// Sink is the sink operator's name, stable across restarts and unique in the job.
	Sink string
	// Subtask is this writer's index, in [0, Parallelism).
	Subtask int
	// Parallelism is the number of writer subtasks of this sink.
	Parallelism int
	// Owner is the run of the job this writer belongs to.
	Owner Owner
	// CheckpointInterval is the job's checkpoint interval: a transaction
	// stays open about this long, longer when checkpoints fail.
	CheckpointInterval time.Duration
	// Logger is the job's logger, annotated with the sink and subtask.
	Logger *slog.Logger
}

// CommitterInfo tells a committer which sink it serves.
type CommitterInfo struct {
	// Job is the job's name, stable across restarts.
	Job string
	// Sink is the sink operator's name, stable across restarts and unique in the job.
	Sink string
	// Owner is the run of the job this committer commits for; see
	// [Committer.Fence].
	Owner Owner
	// TakeOver lets [Committer.Fence] take over a sink that holds another
	// incarnation's progress on a fresh start (the user chose to rerun the
	// job from scratch into the same output).
	TakeOver bool
	// Logger is the job's logger, annotated with the sink.
	Logger *slog.Logger
}

// Owner identifies one run of a job for fencing: the incarnation of its
// checkpoint storage and the epoch of the process that owns that storage.
type Owner struct {
	// Incarnation is the random id created with the job's checkpoint
	// storage. Two runs with the same job name but different checkpoint
	// storage have different incarnations.
	Incarnation string
	// Epoch increases with every process that takes ownership of the
	// checkpoint storage; the owner with the highest epoch is current.
	Epoch uint64
}

// String returns "incarnation/epoch".
func (o Owner) String() string { return fmt.Sprintf("%s/%d", o.Incarnation, o.Epoch) }

// Sink creates the writers and committers of one exactly-once sink.
type Sink[T any] interface {
	// NewWriter opens the writer of one subtask. ctx bounds the opening
	// only (by the job's CommitTimeout): do not keep it.
	NewWriter(ctx context.Context, info WriterInfo) (Writer[T], error)
	// NewCommitter opens a committer. The engine may open several. ctx
	// bounds the opening only, as for NewWriter.
	NewCommitter(ctx context.Context, info CommitterInfo) (Committer, error)
}

// ErrFenced is wrapped by the errors of a committer whose owner is no longer
// the sink's owner: another process took the job over. The engine stops
// the job (it is a zombie) instead of restarting it.
var ErrFenced = errors.New("sink: fenced: a newer owner of the job has taken over")

// ErrForeignProgress is wrapped by the error of [Committer.Fence] when a job
// starting without a checkpoint finds that the sink holds the progress of
// another incarnation of the job, and TakeOver is not set.
var ErrForeignProgress = errors.New("sink: the sink holds the progress of another incarnation of the job")

// ErrPermanent marks commit errors that retrying cannot fix.
var ErrPermanent = errors.New("sink: permanent failure")

// Permanent marks err as permanent: the engine stops the job instead of
// retrying or restarting, and reports err to the user.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err}
}

// IsPermanent reports whether err was marked with [Permanent], or is a
// fencing or foreign-progress error, which retrying cannot fix either.
func IsPermanent(err error) bool {
	return errors.Is(err, ErrPermanent) || errors.Is(err, ErrFenced) || errors.Is(err, ErrForeignProgress)
}

type permanentError struct{ err error }

func (p permanentError) Error() string   { return p.err.Error() }
func (p permanentError) Unwrap() []error { return []error{p.err, ErrPermanent} }
