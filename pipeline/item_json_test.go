package pipeline

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/pipeline/internal/record"
)

// TestItemCrossesStagesWhole encodes items as a stage of a pipeline on a
// cluster does and checks that each comes back equal, every value with
// its type.
func TestItemCrossesStagesWhole(t *testing.T) {
	at := time.Date(2026, 12, 4, 21, 40, 0, 123456789, time.UTC)
	for _, it := range []item{
		{rec: record.Record{"s": "x", "i": 7, "f": 2.5, "b": true, "t": at}, ts: at.UnixNano(), key: "x", args: []any{nil, 7, 2.5}},
		{dead: &deadLetter{stage: "decode", err: "bad", value: "{"}, ts: 5},
		{rec: record.Record{"big": 1 << 53, "neg": -3, "whole": 3.0}},
	} {
		data, err := json.Marshal(it)
		if err != nil {
			t.Fatal(err)
		}
		var back item
		if err := json.Unmarshal(data, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back, it) {
			t.Errorf("%s came back as %#v, want %#v", data, back, it)
		}
	}
}
