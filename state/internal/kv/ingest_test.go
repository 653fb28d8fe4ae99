package kv

import (
	"bytes"
	"fmt"
	"testing"
)

// TestIngestFrom copies the entries of a checkpointed database in a range
// of key groups, but those skipped, into another database that holds
// other key groups: every copied entry reads back with its value (large
// values that the source kept in blob files, merged values as merged),
// nothing outside the range or skipped arrives, and what the database
// held stays.
func TestIngestFrom(t *testing.T) {
	base := t.TempDir()
	src, err := Open(base+"/src", Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := Open(base+"/dst", Options{CacheBytes: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()

	value := func(kg, id, i int) []byte {
		v := fmt.Appendf(nil, "kg %d id %d key %d;", kg, id, i)
		if i%3 == 0 { // separated into a blob file
			v = append(v, bytes.Repeat([]byte{byte(i)}, 2*separatedValueBytes)...)
		}
		return v
	}
	key := func(kg, id, i int) []byte {
		return AppendKey(nil, uint16(kg), uint32(id), fmt.Appendf(nil, "k%04d", i))
	}
	for kg := range 10 {
		for id := range 3 {
			for i := range 50 {
				if err := src.Set(key(kg, id, i), value(kg, id, i)); err != nil {
					t.Fatal(err)
				}
			}
			// A merged entry: its operands concatenated.
			for _, part := range []string{"a", "b", "c"} {
				if err := src.Append(key(kg, id, 1000), []byte(part)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for i := range 20 {
		if err := dst.Set(key(20, 1, i), []byte("kept")); err != nil {
			t.Fatal(err)
		}
	}
	dir, err := src.Checkpoint(1)
	if err != nil {
		t.Fatal(err)
	}
	files, err := OpenFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer files.Close()

	const from, to = 2, 7
	n, err := dst.IngestFrom(files, AppendStatePrefix(nil, from, 0), AppendStatePrefix(nil, to, 0), func(k []byte) bool {
		id, _ := StateIDOf(k)
		return id == 0
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := int64((to - from) * 2 * 51); n != want {
		t.Errorf("IngestFrom copied %d entries, want %d", n, want)
	}
	get := func(k []byte) (string, bool) {
		var got string
		found, err := dst.Get(k, func(v []byte) error { got = string(v); return nil })
		if err != nil {
			t.Fatal(err)
		}
		return got, found
	}
	for kg := range 10 {
		for id := range 3 {
			copied := kg >= from && kg < to && id != 0
			for i := range 50 {
				got, found := get(key(kg, id, i))
				switch {
				case copied && (!found || got != string(value(kg, id, i))):
					t.Fatalf("key group %d, state %d, key %d: found %v, %.40q; want its value", kg, id, i, found, got)
				case !copied && found:
					t.Fatalf("key group %d, state %d, key %d was copied, outside the range or skipped", kg, id, i)
				}
			}
			if got, found := get(key(kg, id, 1000)); copied && got != "abc" || !copied && found {
				t.Fatalf("merged entry of key group %d, state %d: %q, %v", kg, id, got, found)
			}
		}
	}
	for i := range 20 {
		if got, _ := get(key(20, 1, i)); got != "kept" {
			t.Fatalf("the database's own key %d reads %q after the ingestion", i, got)
		}
	}
}
