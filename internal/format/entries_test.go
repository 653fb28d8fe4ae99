package format

import (
	"errors"
	"reflect"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
)

func TestCommittableRoundTrip(t *testing.T) {
	c := sink.Committable{Checkpoint: 1 << 40, Subtask: 17, Incarnation: "7f3a", Data: []byte("txn-abc")}
	got, err := DecodeCommittable(EncodeCommittable(c))
	if err != nil || !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip = %+v, %v; want %+v", got, err, c)
	}
	enc := EncodeCommittable(c)
	for i := 0; i < 5; i++ { // version, id, subtask and incarnation truncated
		if _, err := DecodeCommittable(enc[:i]); !errors.Is(err, checkpoint.ErrCorrupt) {
			t.Errorf("truncated at %d: err = %v, want ErrCorrupt", i, err)
		}
	}
}

func TestCommittableVersion1(t *testing.T) {
	// Version 1, as wave-1 checkpoints hold it: no incarnation.
	v1 := []byte{1, 42, 3, 't', 'x', 'n'}
	got, err := DecodeCommittable(v1)
	want := sink.Committable{Checkpoint: 42, Subtask: 3, Data: []byte("txn")}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("decode v1 = %+v, %v; want %+v", got, err, want)
	}
}

// TestSplitPositionKeepsEventTime round-trips a split position with its
// newest event time and its idleness and still decodes version 1
// positions, which had no event time.
func TestSplitPositionKeepsEventTime(t *testing.T) {
	p := SplitPosition{Split: "topic/3", Pos: []byte{7, 8}, Done: true, Newest: -42}
	got, err := DecodeSplitPosition(EncodeSplitPosition(p))
	if err != nil || !reflect.DeepEqual(got, p) {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	v1 := []byte{1, 0, 1, 'a', 9}
	got, err = DecodeSplitPosition(v1)
	if err != nil || got.Split != "a" || string(got.Pos) != "\x09" || got.Done || got.Newest != NoEventTime {
		t.Fatalf("version 1: %+v, %v", got, err)
	}
	idle := SplitPosition{Split: "topic/4", Pos: []byte{1}, Newest: 5, Idle: true}
	b := EncodeSplitPosition(idle)
	got, err = DecodeSplitPosition(b)
	if err != nil || !reflect.DeepEqual(got, idle) || b[0] != 3 {
		t.Fatalf("idle round trip: %+v, %v (version %d, want 3)", got, err, b[0])
	}
	if b := EncodeSplitPosition(p); b[0] != 2 {
		t.Errorf("a position that is not idle is written in version %d, want 2 (the previous build reads it)", b[0])
	}
	for _, bad := range [][]byte{nil, {4, 0}, {2, 2}, {3, 4}, {2, 0, 1, 'a', 1, 2}, {1, 0, 5, 'a'}} {
		if _, err := DecodeSplitPosition(bad); !errors.Is(err, checkpoint.ErrCorrupt) {
			t.Errorf("malformed %v: err = %v, want ErrCorrupt", bad, err)
		}
	}
}

func TestWatermark(t *testing.T) {
	for _, wm := range []int64{NoEventTime, -1, 0, 1 << 60} {
		if got, err := DecodeWatermark(EncodeWatermark(wm)); err != nil || got != wm {
			t.Errorf("round trip of %d = %d, %v", wm, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {2, 0, 0, 0, 0, 0, 0, 0, 0}, {1, 0}} {
		if _, err := DecodeWatermark(bad); !errors.Is(err, checkpoint.ErrCorrupt) {
			t.Errorf("malformed %v: err = %v, want ErrCorrupt", bad, err)
		}
	}
}
