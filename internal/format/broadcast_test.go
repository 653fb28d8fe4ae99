package format

import (
	"errors"
	"reflect"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
)

func TestBroadcastStateRoundTrip(t *testing.T) {
	states := []BroadcastState{
		{Name: "rules", Entries: []BroadcastEntry{{Key: []byte("a"), Value: []byte("1")}, {Key: []byte("b"), Value: []byte{}}}},
		{Name: "empty", Entries: []BroadcastEntry{}},
	}
	b := EncodeBroadcastState(states)
	if !IsBroadcastState(b) || IsBroadcastState(EncodeWatermark(5)) {
		t.Fatal("IsBroadcastState does not tell a broadcast state entry from a watermark entry")
	}
	got, err := DecodeBroadcastState(b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, states) {
		t.Fatalf("decoded %+v, want %+v", got, states)
	}
	// Every truncation, and a byte too many, is corrupt, never half-read.
	for n := range len(b) {
		if _, err := DecodeBroadcastState(b[:n]); !errors.Is(err, checkpoint.ErrCorrupt) {
			t.Errorf("the first %d of %d bytes: err = %v, want ErrCorrupt", n, len(b), err)
		}
	}
	if _, err := DecodeBroadcastState(append(b, 0)); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Errorf("a byte too many: err = %v, want ErrCorrupt", err)
	}
}
