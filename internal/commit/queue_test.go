package commit

import (
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/exactlyonce/exactly/sink"
)

func TestQueueSubsumption(t *testing.T) {
	var q Queue
	for _, id := range []uint64{3, 4, 6} {
		q.Add(sink.Committable{CheckpointID: id, Data: []byte(fmt.Sprint(id))})
	}
	// Checkpoint 4 was aborted on the way; checkpoint 5 completing covers 3 and 4.
	got := q.Covered(5)
	if ids := idsOf(got); !reflect.DeepEqual(ids, []uint64{3, 4}) {
		t.Fatalf("Covered(5) = %v, want [3 4]", ids)
	}
	for _, c := range got {
		q.Done(c)
	}
	if ids := idsOf(q.Pending()); !reflect.DeepEqual(ids, []uint64{6}) {
		t.Fatalf("Pending after commit = %v, want [6]", ids)
	}
	if len(q.Covered(5)) != 0 {
		t.Fatal("nothing below 6 may remain covered")
	}
}

func TestQueueOutOfOrderAdd(t *testing.T) {
	var q Queue
	q.Add(sink.Committable{CheckpointID: 9})
	q.Add(sink.Committable{CheckpointID: 2})
	if ids := idsOf(q.Pending()); !reflect.DeepEqual(ids, []uint64{2, 9}) {
		t.Fatalf("Pending = %v, want [2 9]", ids)
	}
}

func TestQueueDoneIgnoresNonHead(t *testing.T) {
	var q Queue
	q.Add(sink.Committable{CheckpointID: 1})
	q.Add(sink.Committable{CheckpointID: 2})
	q.Done(sink.Committable{CheckpointID: 2})
	if q.Len() != 2 {
		t.Fatalf("Done of a non-head committable removed it; pending %v", idsOf(q.Pending()))
	}
}

func TestCommittableRoundTrip(t *testing.T) {
	c := sink.Committable{CheckpointID: 1 << 40, Subtask: 17, Incarnation: "7f3a", Data: []byte("txn-abc")}
	got, err := Decode(Encode(c))
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, c)
	}
	enc := Encode(c)
	for i := 0; i < 5; i++ { // version, id, subtask and incarnation truncated
		if _, err := Decode(enc[:i]); !errors.Is(err, errBadCommittable) {
			t.Errorf("truncated at %d: err = %v, want errBadCommittable", i, err)
		}
	}
}

func TestCommittableVersion1(t *testing.T) {
	// Version 1, as wave-1 checkpoints hold it: no incarnation.
	v1 := []byte{1, 42, 3, 't', 'x', 'n'}
	got, err := Decode(v1)
	want := sink.Committable{CheckpointID: 42, Subtask: 3, Data: []byte("txn")}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decode v1 = %+v, %v; want %+v", got, err, want)
	}
}

func idsOf(cs []sink.Committable) []uint64 {
	var ids []uint64
	for _, c := range cs {
		ids = append(ids, c.CheckpointID)
	}
	return ids
}
