package format

import (
	"errors"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
)

func TestAsyncInputRoundTrip(t *testing.T) {
	b := EncodeAsyncInput([]byte("record"))
	got, err := DecodeAsyncInput(b)
	if err != nil || string(got) != "record" {
		t.Fatalf("decoded %q, %v; want record", got, err)
	}
	for _, bad := range [][]byte{nil, {}, EncodeWatermark(3), EncodeBroadcastState(nil)} {
		if _, err := DecodeAsyncInput(bad); !errors.Is(err, checkpoint.ErrCorrupt) {
			t.Errorf("DecodeAsyncInput(%x) = %v, want ErrCorrupt", bad, err)
		}
	}
}
