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
