package kv

import (
	"bytes"
	"testing"
)

func TestKeyLayout(t *testing.T) {
	key := AppendKey(nil, 0x0102, 0x03040506, []byte("user-7"))
	want := []byte{0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 6, 'u', 's', 'e', 'r', '-', '7'}
	if !bytes.Equal(key, want) {
		t.Fatalf("AppendKey = %x, want %x", key, want)
	}
	k, suffix, err := SplitKey(append(key, "entry"...))
	if err != nil || string(k) != "user-7" || string(suffix) != "entry" {
		t.Fatalf("SplitKey = %q, %q, %v", k, suffix, err)
	}
	for _, bad := range [][]byte{nil, key[:5], key[:8], append(key[:6:6], 0x80)} {
		if _, _, err := SplitKey(bad); err == nil {
			t.Errorf("SplitKey(%x) accepted a malformed key", bad)
		}
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, c := range []struct{ prefix, want []byte }{
		{[]byte{1, 2}, []byte{1, 3}},
		{[]byte{1, 0xff}, []byte{2}},
		{[]byte{0xff, 0xff}, nil},
	} {
		if got := PrefixEnd(c.prefix); !bytes.Equal(got, c.want) || (c.want == nil) != (got == nil) {
			t.Errorf("PrefixEnd(%x) = %x, want %x", c.prefix, got, c.want)
		}
	}
}

// TestTimeKeyOrder checks that time index keys sort by due time, negative
// ones included, then by seq, and split back.
func TestTimeKeyOrder(t *testing.T) {
	type timer struct {
		when int64
		seq  uint64
	}
	ordered := []timer{{-1 << 62, 9}, {-5, 0}, {-5, 1}, {0, 0}, {3, 7}, {3, 1 << 40}, {1 << 62, 0}}
	var prev []byte
	for _, tm := range ordered {
		key := AppendTimeKey(nil, 7, 9, tm.when, tm.seq)
		if prev != nil && bytes.Compare(prev, key) >= 0 {
			t.Errorf("time key of %+v sorts before the previous timer's", tm)
		}
		prev = key
		when, seq, err := SplitTimeKey(key)
		if err != nil || when != tm.when || seq != tm.seq {
			t.Errorf("SplitTimeKey(AppendTimeKey(%+v)) = %d, %d, %v", tm, when, seq, err)
		}
	}
	if _, _, err := SplitTimeKey(prev[:len(prev)-1]); err == nil {
		t.Error("SplitTimeKey accepted a short key")
	}
}
