package record

import (
	"strings"
	"testing"
	"time"
)

var orders = Schema{{"id", Int}, {"customer", String}, {"price", Float}, {"paid", Bool}, {"at", Time}}

func TestJSONDecodesEachType(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	for _, strict := range []bool{false, true} {
		rec, err := JSON(orders, strict)([]byte(`{"id":7,"customer":"ann","price":2.5,"paid":true,"at":"2026-12-01T10:00:00Z"}`))
		if err != nil {
			t.Fatalf("strict=%v: %v", strict, err)
		}
		want := Record{"id": 7, "customer": "ann", "price": 2.5, "paid": true, "at": at}
		for k, v := range want {
			if rec[k] != v {
				t.Errorf("strict=%v: %s = %#v, want %#v", strict, k, rec[k], v)
			}
		}
	}
	rec, err := JSON(Schema{{"at", Time}}, true)([]byte(`{"at":1796119200000}`))
	if err != nil || !rec["at"].(time.Time).Equal(at) {
		t.Errorf("milliseconds: %v, %v; want %v", rec["at"], err, at)
	}
}

func TestJSONStrictness(t *testing.T) {
	lax, strict := JSON(orders[:2], false), JSON(orders[:2], true)
	rec, err := lax([]byte(`{"id":1,"extra":true}`))
	if err != nil || rec["customer"] != "" || rec["id"] != 1 {
		t.Errorf("lax: %v, %v; want id 1 and an empty customer", rec, err)
	}
	for _, tc := range []struct {
		dec        Decoder
		in, errMsg string
	}{
		{strict, `{"id":1,"extra":true}`, `field "customer" is missing (strict decoding)`},
		{strict, `{"id":1,"customer":"a","extra":true}`, `field "extra" is not in the schema (strict decoding)`},
		{lax, `{"id":1.5}`, `field "id": 1.5 is not an int`},
		{lax, `{"id":"1"}`, `field "id": "1" is not an int`},
		{lax, `[1]`, `not a JSON object`},
		{lax, `null`, `not a JSON object: null`},
		{lax, `{"id":1} {}`, `not one JSON object: data follows the object`},
	} {
		if _, err := tc.dec([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.errMsg) {
			t.Errorf("%s: error %v, want one containing %q", tc.in, err, tc.errMsg)
		}
	}
}

func TestCSV(t *testing.T) {
	dec := CSV(orders)
	rec, err := dec([]byte(`3,"b, c",1e2,false,1000`))
	if err != nil {
		t.Fatal(err)
	}
	if rec["id"] != 3 || rec["customer"] != "b, c" || rec["price"] != 100.0 || rec["paid"] != false || !rec["at"].(time.Time).Equal(time.UnixMilli(1000)) {
		t.Errorf("got %v", rec)
	}
	for in, msg := range map[string]string{
		`3,b,1,false`:          "not a CSV line of 5 columns: it has 4",
		`3,"b,1,false,1000`:    `not a CSV line of 5 columns: extraneous or missing " in quoted-field`,
		``:                     "not a CSV line of 5 columns: it is empty",
		`x,b,1,false,1000`:     `column 1 (id): "x" is not an int`,
		`3,b,NaN,false,1000`:   `column 3 (price): "NaN" is not a float`,
		`3,b,1,maybe,1000`:     `column 4 (paid): "maybe" is not a bool`,
		`3,b,1,true,yesterday`: `column 5 (at): "yesterday" is not an RFC 3339 time`,
	} {
		if _, err := dec([]byte(in)); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("%s: error %v, want one containing %q", in, err, msg)
		}
	}
}

func TestEncodings(t *testing.T) {
	rec := Record{"id": 1, "customer": "a\"b\nc", "price": 0.1, "paid": true, "at": time.UnixMilli(1500).UTC()}
	if got, want := string(AppendJSON(nil, orders, rec)), `{"id":1,"customer":"a\"b\nc","price":0.1,"paid":true,"at":"1970-01-01T00:00:01.5Z"}`; got != want {
		t.Errorf("JSON %s, want %s", got, want)
	}
	rec["customer"] = "x,y"
	if got, want := string(AppendCSV(nil, orders, rec)), `1,"x,y",0.1,true,1970-01-01T00:00:01.5Z`; got != want {
		t.Errorf("CSV %s, want %s", got, want)
	}
}

func TestValueRejectsNonFiniteAndWrongTypes(t *testing.T) {
	if v, err := Value(Int, int64(3)); err != nil || v != 3 {
		t.Errorf("int64: %v, %v", v, err)
	}
	for _, tc := range []struct {
		t Type
		v any
	}{{Float, 1.0 / zero()}, {Int, "3"}, {String, nil}} {
		if _, err := Value(tc.t, tc.v); err == nil {
			t.Errorf("Value(%v, %#v) = nil error", tc.t, tc.v)
		}
	}
}

// zero is 0, out of the compiler's sight.
func zero() float64 { return 0 }
