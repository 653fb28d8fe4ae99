package state

import (
	"bytes"
	"fmt"
	"testing"
)

// TestPebbleStateLargerThanMemory keeps 100,000 values of 256 bytes, about
// 26 MB: more than Pebble's memtable (4 MB) and block cache (8 MB) by
// default, so reads go to the files on disk. Every value must read back,
// and survive a snapshot restored into a fresh Pebble backend.
func TestPebbleStateLargerThanMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 26 MB")
	}
	const keys = 100_000
	value := func(i int64) []byte { return bytes.Repeat([]byte(fmt.Sprintf("%08d", i)), 32) }
	b := newBackend(t, PebbleBackend, Int64Codec{}, DefaultMaxParallelism, KeyGroupRange{0, DefaultMaxParallelism})
	s := must(NewValueState[int64, []byte](b.Scope(), "blob", BytesCodec{}))
	for i := range int64(keys) {
		b.SetCurrentKey(i)
		s.Update(value(i))
	}
	check := func(what string, b *KeyedBackend[int64], s *ValueState[int64, []byte]) {
		t.Helper()
		for i := range int64(keys) {
			b.SetCurrentKey(i)
			if v, ok := s.Value(); !ok || !bytes.Equal(v, value(i)) {
				t.Fatalf("%s: key %d holds %q, %v", what, i, v, ok)
			}
		}
	}
	check("written", b, s)
	restored := newBackend(t, PebbleBackend, Int64Codec{}, DefaultMaxParallelism, KeyGroupRange{0, DefaultMaxParallelism})
	rs := must(NewValueState[int64, []byte](restored.Scope(), "blob", BytesCodec{}))
	blobs, err := b.Snapshot()()
	if err != nil {
		t.Fatal(err)
	}
	for kg, blob := range blobs {
		if err := restored.Restore(kg, blob); err != nil {
			t.Fatal(err)
		}
	}
	check("restored", restored, rs)
}
