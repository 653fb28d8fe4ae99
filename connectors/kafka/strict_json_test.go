package kafka_test

import (
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/connectors/kafka"
)

type order struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Note     string `json:"note,omitempty"`
	Coupon   *string
	internal int // unexported: never required
}

// TestStrictJSON: what kafka.JSON silently accepts, StrictJSON rejects with
// an error naming the field.
func TestStrictJSON(t *testing.T) {
	t.Parallel()
	strict := kafka.StrictJSON[order]()
	for _, c := range []struct {
		in, wantErr string
	}{
		{`{"id":"a","amount":3}`, ""},
		{`{"ID":"a","Amount":3,"note":"x","Coupon":"c"}`, ""},
		{`null`, "null"},
		{`[1]`, "not a JSON object"},
		{`{"id":"a"}`, `field "amount" is missing`},
		{`{"id":null,"amount":1}`, `field "id" is null`},
		{`{"id":"a","amount":1,"colour":"red"}`, `unknown field "colour"`},
		{`{"id":"a","amount":"x"}`, "cannot unmarshal"},
		{`{"id":"a","amount":1} {}`, "not a JSON object"},
		{`{}`, `field "id" is missing`},
	} {
		v, err := strict([]byte(c.in))
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("StrictJSON(%s) = %v; want it accepted", c.in, err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("StrictJSON(%s) = %+v, %v; want an error containing %q", c.in, v, err, c.wantErr)
		}
	}
	// What the lenient decoder lets through.
	if _, err := kafka.JSON[order]()([]byte(`null`)); err != nil {
		t.Fatalf("JSON(null) = %v: the lenient decoder changed", err)
	}
}

func TestStrictJSONNeedsAStruct(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Fatal("StrictJSON[int] did not panic")
		}
	}()
	kafka.StrictJSON[int]()
}
