package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/coordinator"
)

// checkpoint snapshots every operator of the chain, forwards the barrier and
// writes the state on another goroutine, which acknowledges when it is
// durable. alignment is the time the barrier's alignment held inputs.
func (t *task) checkpoint(ctx context.Context, b barrier, alignment time.Duration) error {
	id, kind := b.id, b.kind
	if b.endOfInput {
		// Output after the final barrier would go into a transaction that
		// no checkpoint covers: processing-time timers still pending at
		// the end of the input never fire.
		t.inputEnded = true
	}
	type pending struct {
		m      *member
		encode func() (checkpoint.SubtaskSnapshot, error)
	}
	var snaps []pending
	for _, m := range t.members {
		s := m.snapshotter()
		if s == nil {
			continue
		}
		var encode func() (checkpoint.SubtaskSnapshot, error)
		var err error
		if ks, ok := s.(KindSnapshotter); ok {
			encode, err = ks.SnapshotKind(ctx, id, kind)
		} else {
			encode, err = s.Snapshot(ctx, id)
		}
		if err != nil {
			return fmt.Errorf("%s[%d]: snapshot for checkpoint %d: %w", m.spec.Name, t.subtask, id, err)
		}
		snaps = append(snaps, pending{m, encode})
	}
	t.probe(ProbeSnapshotTaken, id)
	for _, r := range t.routers {
		if err := r.Broadcast(barrierMessage(b)); err != nil {
			return err
		}
	}
	t.async.Go(func() {
		var states []coordinator.SubtaskState
		for _, p := range snaps {
			snap, err := encodeRecovered(fmt.Sprintf("%s[%d]: encoding the snapshot", p.m.spec.Name, t.subtask), p.encode)
			var pe *PanicError
			if errors.As(err, &pe) {
				// A bug, not a transient failure: fail the attempt rather
				// than declining every checkpoint from now on.
				t.report(ctx, event{kind: evTaskFailed, err: err})
				return
			}
			if err == nil && snap.IsEmpty() {
				continue
			}
			var h checkpoint.StateHandle
			if err == nil {
				h, err = t.writer(id, kind, p.m.spec.Name, t.subtask, snap)
			}
			if err != nil {
				t.logger.Warn("checkpoint declined", "checkpoint", id, "operator", p.m.spec.Name, "error", err)
				t.report(ctx, event{kind: evDecline, id: id, err: err})
				return
			}
			h.Subtask = t.subtask
			if p.m.spec.Keyed {
				h.KeyGroupStart, h.KeyGroupEnd = p.m.keys.Start, p.m.keys.End
			}
			states = append(states, coordinator.SubtaskState{Operator: p.m.spec.Name, Parallelism: p.m.spec.Parallelism, Handle: h})
		}
		t.report(ctx, event{kind: evAck, id: id, states: states, alignment: alignment})
	})
	return nil
}

// encodeRecovered calls encode; a panic in it (a user's codec) becomes an error.
func encodeRecovered(where string, encode func() (checkpoint.SubtaskSnapshot, error)) (snap checkpoint.SubtaskSnapshot, err error) {
	defer recoverAs(where, &err)
	return encode()
}
