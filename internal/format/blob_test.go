package format

import (
	"errors"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
)

// TestFieldReader reads counts, indexes and byte strings written without a
// version byte, and checks that a truncated index is corrupt.
func TestFieldReader(t *testing.T) {
	src := AppendCount(nil, 2)
	src = AppendCount(src, 1<<20) // an index larger than the bytes left
	src = AppendBytes(src, []byte("blob"))
	r := FieldReader(src)
	if n, err := r.Count(); err != nil || n != 2 {
		t.Fatalf("Count = %d, %v; want 2", n, err)
	}
	if n, err := r.Uvarint(); err != nil || n != 1<<20 {
		t.Fatalf("Uvarint = %d, %v; want %d", n, err, 1<<20)
	}
	if rest := r.Rest(); string(rest) != string(AppendBytes(nil, []byte("blob"))) {
		t.Fatalf("Rest = %q", rest)
	}
	if b, err := r.Bytes(); err != nil || string(b) != "blob" || r.More() {
		t.Fatalf("Bytes = %q, %v, more %v", b, err, r.More())
	}
	if _, err := FieldReader([]byte{0x80}).Uvarint(); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("a truncated uvarint: %v, want ErrCorrupt", err)
	}
}

// TestPutFirstSection: a first section written in place after its room is
// the blob AppendSection makes, with and without a TTL, for short and long
// names and counts.
func TestPutFirstSection(t *testing.T) {
	entries := []byte("entries of the section")
	for _, name := range []string{"", "count", string(make([]byte, 300))} {
		for _, kind := range []byte{1, 2 | KindTTL} {
			for _, count := range []int{0, 1, 1 << 40} {
				room := SectionHeaderRoom(name)
				buf := append(make([]byte, room), entries...)
				got := PutFirstSection(buf, name, kind, count)
				if want := AppendSection(nil, name, kind, count, entries); string(got) != string(want) {
					t.Fatalf("name of %d bytes, kind %#x, count %d: %x, want %x", len(name), kind, count, got, want)
				}
			}
		}
	}
}
