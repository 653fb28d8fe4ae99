package runtime

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
)

// recorder is an operator that records what it processed and, at each
// snapshot, what it had processed by then.
type recorder struct {
	seen      []int
	snapshots map[checkpoint.ID][]int
}

func (r *recorder) Process(_ context.Context, batch any) error {
	r.seen = append(r.seen, batch.([]int)...)
	return nil
}

func (r *recorder) Snapshot(_ context.Context, id checkpoint.ID) (func() (checkpoint.SubtaskSnapshot, error), error) {
	if r.snapshots == nil {
		r.snapshots = map[checkpoint.ID][]int{}
	}
	r.snapshots[id] = slices.Clone(r.seen)
	return func() (checkpoint.SubtaskSnapshot, error) {
		return checkpoint.SubtaskSnapshot{Entries: [][]byte{{byte(id)}}}, nil
	}, nil
}

// runTask runs a task with the given preloaded inputs until it ends, and
// returns the recorder and the events it reported.
func runTask(t *testing.T, inputs ...[]Message) (*recorder, []event) {
	t.Helper()
	rec := &recorder{}
	events := make(chan event, 100)
	var async sync.WaitGroup
	tk := &task{
		name:    "rec[0]",
		members: []*member{{spec: &OperatorSpec{Name: "rec", Parallelism: 1}, op: rec}},
		mail:    newMailbox(),
		events:  events,
		async:   &async,
		writer: func(id checkpoint.ID, kind checkpoint.Kind, op string, sub int, snap checkpoint.SubtaskSnapshot) (checkpoint.StateHandle, error) {
			return checkpoint.StateHandle{File: op}, nil
		},
		probe:  func(ProbePoint, checkpoint.ID) {},
		logger: discardLogger(),
	}
	for _, msgs := range inputs {
		c := make(chan Message, len(msgs))
		for _, m := range msgs {
			c <- m
		}
		tk.inputs = append(tk.inputs, c)
	}
	if err := tk.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	async.Wait()
	close(events)
	var out []event
	for e := range events {
		out = append(out, e)
	}
	return rec, out
}

func data(v ...int) Message { return Message{batch: v} }
func barrierAt(id checkpoint.ID) Message {
	return barrierMessage(barrier{id: id, kind: checkpoint.KindCheckpoint})
}

// TestBarrierAlignment: records after a barrier on one input wait until the
// barrier arrived on every input, so the snapshot holds exactly the records
// before the barrier on each input.
func TestBarrierAlignment(t *testing.T) {
	rec, events := runTask(t,
		[]Message{data(1, 2), barrierAt(5), data(3), barrierAt(6), data(4), endOfStream},
		[]Message{data(10), data(11), barrierAt(5), data(12), barrierAt(6), endOfStream},
	)
	want := map[checkpoint.ID][]int{5: {1, 2, 10, 11}, 6: {1, 2, 3, 10, 11, 12}}
	for id, w := range want {
		got := slices.Sorted(slices.Values(rec.snapshots[id]))
		if !slices.Equal(got, w) {
			t.Errorf("snapshot %d saw %v, want %v", id, got, w)
		}
	}
	if got := slices.Sorted(slices.Values(rec.seen)); !slices.Equal(got, []int{1, 2, 3, 4, 10, 11, 12}) {
		t.Errorf("processed %v", got)
	}
	var acks []checkpoint.ID
	done := 0
	for _, e := range events {
		switch e.kind {
		case evAck:
			acks = append(acks, e.id)
			if len(e.states) != 1 || e.states[0].Operator != "rec" {
				t.Errorf("ack %d states = %+v", e.id, e.states)
			}
		case evTaskDone:
			done++
		default:
			t.Errorf("unexpected event %+v", e)
		}
	}
	slices.Sort(acks)
	if !slices.Equal(acks, []checkpoint.ID{5, 6}) || done != 1 {
		t.Errorf("acks %v, done %d; want [5 6] and 1", acks, done)
	}
}

// TestAlignmentWithFinishedInput: an input that ended does not hold up
// the alignment of the others.
func TestAlignmentWithFinishedInput(t *testing.T) {
	rec, _ := runTask(t,
		[]Message{data(1), endOfStream},
		[]Message{data(2), barrierAt(3), data(4), endOfStream},
	)
	if got := slices.Sorted(slices.Values(rec.snapshots[3])); !slices.Equal(got, []int{1, 2}) {
		t.Errorf("snapshot 3 saw %v, want [1 2]", got)
	}
}

// TestNewerBarrierAbandonsAlignment: when the barrier of a newer checkpoint
// arrives before an older alignment finished (the older one was aborted
// upstream), the task aligns on the newer one.
func TestNewerBarrierAbandonsAlignment(t *testing.T) {
	rec, events := runTask(t,
		[]Message{barrierAt(1), barrierAt(2), data(1), endOfStream},
		[]Message{data(2), barrierAt(2), endOfStream},
	)
	if _, ok := rec.snapshots[1]; ok {
		t.Error("abandoned checkpoint 1 was snapshotted")
	}
	if got := rec.snapshots[2]; !slices.Equal(got, []int{2}) {
		t.Errorf("snapshot 2 saw %v, want [2]", got)
	}
	for _, e := range events {
		if e.kind == evAck && e.id != 2 {
			t.Errorf("ack for checkpoint %d", e.id)
		}
	}
}
