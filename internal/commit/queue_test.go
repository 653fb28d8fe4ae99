package commit

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
)

func TestQueueSubsumption(t *testing.T) {
	var q Queue
	for _, id := range []checkpoint.ID{3, 4, 6} {
		q.Add(sink.Committable{Checkpoint: id, Data: []byte(fmt.Sprint(id))})
	}
	// Checkpoint 4 was aborted on the way; checkpoint 5 completing covers 3 and 4.
	got := q.Covered(5)
	if ids := idsOf(got); !reflect.DeepEqual(ids, []checkpoint.ID{3, 4}) {
		t.Fatalf("Covered(5) = %v, want [3 4]", ids)
	}
	for _, c := range got {
		q.Done(c)
	}
	if ids := idsOf(q.Pending()); !reflect.DeepEqual(ids, []checkpoint.ID{6}) {
		t.Fatalf("Pending after commit = %v, want [6]", ids)
	}
	if len(q.Covered(5)) != 0 {
		t.Fatal("nothing below 6 may remain covered")
	}
}

func TestQueueOutOfOrderAdd(t *testing.T) {
	var q Queue
	q.Add(sink.Committable{Checkpoint: 9})
	q.Add(sink.Committable{Checkpoint: 2})
	if ids := idsOf(q.Pending()); !reflect.DeepEqual(ids, []checkpoint.ID{2, 9}) {
		t.Fatalf("Pending = %v, want [2 9]", ids)
	}
}

func TestQueueDoneIgnoresNonHead(t *testing.T) {
	var q Queue
	q.Add(sink.Committable{Checkpoint: 1})
	q.Add(sink.Committable{Checkpoint: 2})
	q.Done(sink.Committable{Checkpoint: 2})
	if q.Len() != 2 {
		t.Fatalf("Done of a non-head committable removed it; pending %v", idsOf(q.Pending()))
	}
}

func idsOf(cs []sink.Committable) []checkpoint.ID {
	var ids []checkpoint.ID
	for _, c := range cs {
		ids = append(ids, c.Checkpoint)
	}
	return ids
}
