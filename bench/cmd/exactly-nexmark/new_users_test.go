package main

import "testing"

// TestNewUserCodec round-trips q8's checkpointed accumulator and refuses
// a damaged one.
func TestNewUserCodec(t *testing.T) {
	for _, u := range []newUser{{}, {joined: true, name: []byte("Kate Smith")}, {sold: true}, {joined: true, sold: true, name: []byte("x")}} {
		got, err := newUserCodec{}.Decode(newUserCodec{}.Append(nil, u))
		if err != nil || got.joined != u.joined || got.sold != u.sold || string(got.name) != string(u.name) {
			t.Errorf("round trip of %+v: %+v, %v", u, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {4}, {0xff, 'x'}} {
		if u, err := (newUserCodec{}).Decode(bad); err == nil {
			t.Errorf("Decode(%v) = %+v, no error", bad, u)
		}
	}
}

// TestQ3EventCodec round-trips q3's kept persons and auctions and refuses
// damaged ones.
func TestQ3EventCodec(t *testing.T) {
	for _, e := range []q3Event{{person: true, id: 1007, fields: []byte("Kate Smith,Bend,OR"), inputMillis: 1767225600000}, {id: 1003, seller: 1002, inputMillis: -1}} {
		got, err := q3EventCodec{}.Decode(q3EventCodec{}.Append(nil, e))
		if err != nil || got.person != e.person || got.id != e.id || got.seller != e.seller || got.inputMillis != e.inputMillis || string(got.fields) != string(e.fields) {
			t.Errorf("round trip of %+v: %+v, %v", e, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {2}, {1, 0x80}, {0, 2, 4}} {
		if e, err := (q3EventCodec{}).Decode(bad); err == nil {
			t.Errorf("Decode(%v) = %+v, no error", bad, e)
		}
	}
}
