package commit

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/exactlyonce/exactly/sink"
)

// Queue holds the committables of one writer subtask that are prepared but
// not yet committed. It is pure bookkeeping: it does no I/O.
//
// The engine adds each committable returned by Prepare, stores [Queue.Pending]
// in the checkpoint, and when a checkpoint completes takes [Queue.Covered] and
// commits them in order, calling [Queue.Done] after each success.
type Queue struct {
	pending []sink.Committable // sorted by CheckpointID
}

// Add records a committable prepared for c.CheckpointID. Committables are
// added in increasing checkpoint order.
func (q *Queue) Add(c sink.Committable) {
	i, _ := slices.BinarySearchFunc(q.pending, c.CheckpointID, func(p sink.Committable, id uint64) int {
		switch {
		case p.CheckpointID < id:
			return -1
		case p.CheckpointID > id:
			return 1
		}
		return 0
	})
	q.pending = slices.Insert(q.pending, i, c)
}

// Covered returns, oldest first, the pending committables that completed
// checkpoint id covers: every one prepared at a checkpoint id or below.
func (q *Queue) Covered(id uint64) []sink.Committable {
	n := 0
	for n < len(q.pending) && q.pending[n].CheckpointID <= id {
		n++
	}
	return slices.Clone(q.pending[:n])
}

// Done removes a committed committable. It must be the oldest pending one.
func (q *Queue) Done(c sink.Committable) {
	if len(q.pending) > 0 && q.pending[0].CheckpointID == c.CheckpointID && q.pending[0].Subtask == c.Subtask {
		q.pending = q.pending[1:]
	}
}

// Pending returns every pending committable, oldest first.
func (q *Queue) Pending() []sink.Committable { return slices.Clone(q.pending) }

// Len returns the number of pending committables.
func (q *Queue) Len() int { return len(q.pending) }

// Committable encodings: version 1 had no incarnation; version 2 adds it
// as a uvarint-length-prefixed string after the subtask.
const (
	committableV1 = 1
	committableV2 = 2
)

// errBadCommittable is wrapped by Decode errors.
var errBadCommittable = errors.New("commit: malformed committable")

// Encode serializes c for a checkpoint.
func Encode(c sink.Committable) []byte {
	b := []byte{committableV2}
	b = binary.AppendUvarint(b, c.CheckpointID)
	b = binary.AppendUvarint(b, uint64(c.Subtask))
	b = binary.AppendUvarint(b, uint64(len(c.Incarnation)))
	b = append(b, c.Incarnation...)
	return append(b, c.Data...)
}

// Decode parses the output of [Encode], and the
// version 1 encoding of earlier checkpoints (with an empty incarnation).
func Decode(b []byte) (sink.Committable, error) {
	if len(b) == 0 || (b[0] != committableV1 && b[0] != committableV2) {
		return sink.Committable{}, fmt.Errorf("%w: unknown version (a checkpoint from a newer engine?)", errBadCommittable)
	}
	version := b[0]
	b = b[1:]
	id, n := binary.Uvarint(b)
	if n <= 0 {
		return sink.Committable{}, fmt.Errorf("%w: bad checkpoint id", errBadCommittable)
	}
	b = b[n:]
	sub, n := binary.Uvarint(b)
	if n <= 0 || sub > 1<<31 {
		return sink.Committable{}, fmt.Errorf("%w: bad subtask", errBadCommittable)
	}
	b = b[n:]
	c := sink.Committable{CheckpointID: id, Subtask: int(sub)}
	if version == committableV2 {
		size, n := binary.Uvarint(b)
		if n <= 0 || size > uint64(len(b)-n) {
			return sink.Committable{}, fmt.Errorf("%w: bad incarnation", errBadCommittable)
		}
		c.Incarnation = string(b[n : n+int(size)])
		b = b[n+int(size):]
	}
	c.Data = slices.Clone(b)
	return c, nil
}
