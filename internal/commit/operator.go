package commit

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/sink"
)

// Restore is the Restore hook of a sink operator (see
// [runtime.OperatorSpec]): before any task runs, it opens the sink's
// committer and fences earlier owners (the sink may refuse the start); the
// returned step then commits every committable of the restored checkpoint,
// oldest first, and aborts whatever else earlier attempts left behind.
func Restore[T any](ctx context.Context, sk sink.Sink[T], rc runtime.RestoreContext) (runtime.Restoring, error) {
	var pending []sink.Committable
	for _, e := range rc.Entries {
		c, err := format.DecodeCommittable(e)
		if err != nil {
			return nil, err
		}
		pending = append(pending, c)
	}
	slices.SortStableFunc(pending, func(a, b sink.Committable) int {
		return cmp.Or(cmp.Compare(a.Checkpoint, b.Checkpoint), cmp.Compare(a.Subtask, b.Subtask))
	})
	var c sink.Committer
	err := bounded(ctx, rc.Commit.Timeout, func(ctx context.Context) (err error) {
		c, err = sk.NewCommitter(ctx, sink.CommitterInfo{Job: rc.Job, Sink: rc.Operator, Owner: rc.Owner, TakeOver: rc.TakeOverSinks, Logger: rc.Logger})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening the committer: %w", err)
	}
	if err := bounded(ctx, rc.Commit.Timeout, func(ctx context.Context) error { return c.Fence(ctx, rc.Checkpoint) }); err != nil {
		return nil, errors.Join(fmt.Errorf("fencing earlier owners as %s: %w", rc.Owner, err), c.Close())
	}
	return &restoring{c: c, pending: pending, rc: rc}, nil
}

// restoring is a fenced committer with the restored committables it
// commits.
type restoring struct {
	c       sink.Committer
	pending []sink.Committable
	rc      runtime.RestoreContext
}

// Finish commits the restored committables, then aborts lingering
// transactions.
func (r *restoring) Finish(ctx context.Context) error {
	for _, p := range r.pending {
		if err := commitWithRetry(ctx, r.c, p, r.rc.Commit); err != nil {
			return err
		}
	}
	if err := bounded(ctx, r.rc.Commit.Timeout, func(ctx context.Context) error { return r.c.AbortLingering(ctx, r.rc.Checkpoint) }); err != nil {
		return fmt.Errorf("aborting lingering transactions: %w", err)
	}
	if r.rc.Checkpoint != 0 && r.rc.Logger != nil {
		r.rc.Logger.Info("sink restored: committed what the checkpoint covers, aborted what it does not",
			"checkpoint", r.rc.Checkpoint, "committed", len(r.pending))
	}
	return nil
}

// Close closes the committer.
func (r *restoring) Close() error { return r.c.Close() }

// commitWithRetry commits c, each attempt bounded by policy.Timeout,
// retrying transient failures with exponential backoff from 50ms; errors
// marked permanent are not retried.
func commitWithRetry(ctx context.Context, c sink.Committer, p sink.Committable, policy runtime.CommitPolicy) error {
	backoff := 50 * time.Millisecond
	for attempt := 0; ; attempt++ {
		err := bounded(ctx, policy.Timeout, func(ctx context.Context) error { return c.Commit(ctx, p) })
		if err == nil {
			return nil
		}
		err = fmt.Errorf("committing checkpoint %d of subtask %d: %w", p.Checkpoint, p.Subtask, err)
		if sink.IsPermanent(err) || attempt >= policy.Retries {
			return err
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		}
		backoff *= 2
	}
}

// bounded runs call with ctx bounded by timeout (none if it is 0), so that
// a sink that does not answer (a network holding the connection's packets)
// fails the call instead of hanging the job; the error then says so. The
// context given to NewWriter and NewCommitter bounds only their opening.
func bounded(ctx context.Context, timeout time.Duration, call func(context.Context) error) error {
	if timeout <= 0 {
		return call(ctx)
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := call(cctx)
	if err != nil && ctx.Err() == nil && errors.Is(cctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within CommitTimeout %v: %w", timeout, err)
	}
	return err
}

// Operator is one subtask of a sink: a writer, a committer and the queue of
// prepared transactions not yet committed.
type Operator[T any] struct {
	oc        runtime.OperatorContext
	writer    sink.Writer[T]
	committer sink.Committer
	queue     Queue
}

// NewOperator opens the writer and the committer of one sink subtask.
func NewOperator[T any](ctx context.Context, oc runtime.OperatorContext, sk sink.Sink[T]) (*Operator[T], error) {
	var w sink.Writer[T]
	err := bounded(ctx, oc.Commit.Timeout, func(ctx context.Context) (err error) {
		w, err = sk.NewWriter(ctx, sink.WriterInfo{Job: oc.Job, Sink: oc.Operator, Subtask: oc.Subtask,
			Parallelism: oc.Parallelism, Owner: oc.Owner, CheckpointInterval: oc.CheckpointInterval, Logger: oc.Logger})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening the writer: %w", err)
	}
	var c sink.Committer
	err = bounded(ctx, oc.Commit.Timeout, func(ctx context.Context) (err error) {
		c, err = sk.NewCommitter(ctx, sink.CommitterInfo{Job: oc.Job, Sink: oc.Operator, Owner: oc.Owner, Logger: oc.Logger})
		return err
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("opening the committer: %w", err), w.Close())
	}
	return &Operator[T]{oc: oc, writer: w, committer: c}, nil
}

// Process writes a batch into the open transaction.
func (s *Operator[T]) Process(ctx context.Context, batch any) error {
	in, ok := batch.([]T)
	if !ok {
		return fmt.Errorf("commit: internal error: sink %q got a batch of %T, want %T", s.oc.Operator, batch, in)
	}
	return s.writer.Write(ctx, in)
}

// Watermark hands the sink's input watermark to a writer that carries
// watermarks downstream (sink.WatermarkWriter).
func (s *Operator[T]) Watermark(_ context.Context, wm int64) error {
	if w, ok := s.writer.(sink.WatermarkWriter); ok {
		w.Watermark(wm)
	}
	return nil
}

// Idle tells a writer that carries watermarks that the sink's input became
// idle.
func (s *Operator[T]) Idle(context.Context) error {
	if w, ok := s.writer.(sink.WatermarkWriter); ok {
		w.Idle()
	}
	return nil
}

// Snapshot prepares the open transaction and checkpoints every committable
// not yet committed.
func (s *Operator[T]) Snapshot(ctx context.Context, id checkpoint.ID) (func() (checkpoint.SubtaskSnapshot, error), error) {
	data, err := s.writer.Prepare(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if data != nil {
		s.queue.Add(sink.Committable{Checkpoint: id, Subtask: s.oc.Subtask, Incarnation: s.oc.Owner.Incarnation, Data: data})
	}
	var snap checkpoint.SubtaskSnapshot
	for _, c := range s.queue.Pending() {
		snap.Entries = append(snap.Entries, format.EncodeCommittable(c))
	}
	return func() (checkpoint.SubtaskSnapshot, error) { return snap, nil }, nil
}

// CheckpointComplete commits everything checkpoint id covers, oldest first.
func (s *Operator[T]) CheckpointComplete(ctx context.Context, id checkpoint.ID) error {
	for _, c := range s.queue.Covered(id) {
		if err := commitWithRetry(ctx, s.committer, c, s.oc.Commit); err != nil {
			return err
		}
		s.queue.Done(c)
	}
	return nil
}

// Close commits what the last completed checkpoint covers and aborts what
// no completed checkpoint covers when the job stops deliberately; after a
// failure it leaves both to recovery. A committable that the completed
// checkpoint covers is never aborted, even when its commit fails: it is
// stored in that checkpoint, and the next start commits it.
func (s *Operator[T]) Close(ctx context.Context, completed checkpoint.ID, clean bool) error {
	var errs []error
	if clean {
		if err := s.CheckpointComplete(ctx, completed); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrPending, err))
		}
		for _, c := range s.queue.Pending() {
			if c.Checkpoint > completed {
				errs = append(errs, bounded(ctx, s.oc.Commit.Timeout, func(ctx context.Context) error { return s.committer.Abort(ctx, c) }))
			}
		}
	}
	errs = append(errs, s.writer.Close(), s.committer.Close())
	return errors.Join(errs...)
}

// ErrPending is wrapped by the error of a job that stopped while the
// output of its last completed checkpoint could not be committed. The
// output is not lost: it is prepared and recorded in that checkpoint, and
// the next start of the job commits it (after the cause, such as a sink
// outage or a constraint the rows violate, is fixed).
var ErrPending = errors.New("commit: the last checkpoint's output is safe but not yet committed: it will be committed when the job starts again")
