package commit

import (
	"slices"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
)

// Queue holds the committables of one writer subtask that are prepared but
// not yet committed. It is pure bookkeeping: it does no I/O.
//
// The engine adds each committable returned by Prepare, stores [Queue.Pending]
// in the checkpoint, and when a checkpoint completes takes [Queue.Covered] and
// commits them in order, calling [Queue.Done] after each success.
type Queue struct {
	pending []sink.Committable // sorted by Checkpoint
}

// Add records a committable prepared for c.Checkpoint. Committables are
// added in increasing checkpoint order.
func (q *Queue) Add(c sink.Committable) {
	i, _ := slices.BinarySearchFunc(q.pending, c.Checkpoint, func(p sink.Committable, id checkpoint.ID) int {
		switch {
		case p.Checkpoint < id:
			return -1
		case p.Checkpoint > id:
			return 1
		}
		return 0
	})
	q.pending = slices.Insert(q.pending, i, c)
}

// Covered returns, oldest first, the pending committables that completed
// checkpoint id covers: every one prepared at a checkpoint id or below.
func (q *Queue) Covered(id checkpoint.ID) []sink.Committable {
	n := 0
	for n < len(q.pending) && q.pending[n].Checkpoint <= id {
		n++
	}
	return slices.Clone(q.pending[:n])
}

// Done removes a committed committable. It must be the oldest pending one.
func (q *Queue) Done(c sink.Committable) {
	if len(q.pending) > 0 && q.pending[0].Checkpoint == c.Checkpoint && q.pending[0].Subtask == c.Subtask {
		q.pending = q.pending[1:]
	}
}

// Pending returns every pending committable, oldest first.
func (q *Queue) Pending() []sink.Committable { return slices.Clone(q.pending) }

// Len returns the number of pending committables.
func (q *Queue) Len() int { return len(q.pending) }
