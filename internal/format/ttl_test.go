package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
)

// TestBlobVersionFollowsTTL: a blob is version 1 until a section with
// expiry times is appended, which makes it version 2; a version 1 blob
// with such a section is corrupt.
func TestBlobVersionFollowsTTL(t *testing.T) {
	plain := AppendSection(nil, "count", 1, 1, AppendBytes(AppendBytes(nil, []byte("k")), []byte("v")))
	if plain[0] != StateBlobVersion {
		t.Fatalf("a blob without a TTL section has version %d, want %d", plain[0], StateBlobVersion)
	}
	entry := AppendBytes(AppendInt64(AppendBytes(nil, []byte("k")), -42), []byte("v"))
	ttl := AppendSection(plain, "seen", 1|KindTTL, 1, entry)
	if ttl[0] != StateBlobTTLVersion {
		t.Fatalf("a blob with a TTL section has version %d, want %d", ttl[0], StateBlobTTLVersion)
	}
	r, err := NewBlobReader(ttl)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		name string
		kind byte
	}{{"count", 1}, {"seen", 1 | KindTTL}} {
		name, kind, count, err := r.Section(func(n string) string { return n })
		if err != nil || name != want.name || kind != want.kind || count != 1 {
			t.Fatalf("section %q %#x %d, %v; want %q %#x", name, kind, count, err, want.name, want.kind)
		}
		if _, err := r.Bytes(); err != nil {
			t.Fatal(err)
		}
		if kind&KindTTL != 0 {
			if exp, err := r.Int64(); err != nil || exp != -42 {
				t.Fatalf("expiry %d, %v; want -42", exp, err)
			}
		}
		if _, err := r.Bytes(); err != nil {
			t.Fatal(err)
		}
	}
	if r.More() {
		t.Fatal("bytes left after the last section")
	}

	forged := append([]byte{StateBlobVersion}, ttl[1:]...)
	r, err = NewBlobReader(forged)
	if err != nil {
		t.Fatal(err)
	}
	r.Section(func(n string) string { return n })
	r.Bytes()
	r.Bytes()
	if _, _, _, err := r.Section(func(n string) string { return n }); !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "need blob version 2") {
		t.Fatalf("a TTL section in a version 1 blob: %v, want ErrCorrupt", err)
	}
	if _, err := NewBlobReader([]byte{3}); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("blob version 3: %v, want ErrCorrupt", err)
	}
	if _, err := (&BlobReader{src: []byte{1, 2, 3}}).Int64(); !errors.Is(err, checkpoint.ErrCorrupt) {
		t.Fatalf("a truncated expiry: %v, want ErrCorrupt", err)
	}
}

// TestStateFileTTLVersion: a state file holding state with a TTL (a
// version 2 blob, or a database state of a kind with KindTTL) is written
// as version 3 and round-trips; the others keep their versions; a
// version that does not match the contents is corrupt.
func TestStateFileTTLVersion(t *testing.T) {
	ttlBlob := AppendSection(nil, "seen", 2|KindTTL, 0, nil)
	db := checkpoint.DBFiles{KeyGroupStart: 0, KeyGroupEnd: 4,
		States: []checkpoint.DBState{{Name: "seen", Kind: 2 | KindTTL, ID: 1}},
		Files:  []checkpoint.DBFile{{Name: "MANIFEST-000001", Data: []byte("m")}}}
	plainDB := db
	plainDB.States = []checkpoint.DBState{{Name: "seen", Kind: 2, ID: 1}}
	for _, c := range []struct {
		name    string
		snap    checkpoint.SubtaskSnapshot
		version uint32
	}{
		{"plain blob", checkpoint.SubtaskSnapshot{KeyGroups: map[int][]byte{1: AppendSection(nil, "n", 1, 0, nil)}}, 1},
		{"plain database", checkpoint.SubtaskSnapshot{DBs: []checkpoint.DBFiles{plainDB}}, 2},
		{"TTL blob", checkpoint.SubtaskSnapshot{KeyGroups: map[int][]byte{1: ttlBlob}, Entries: [][]byte{{9}}}, 3},
		{"TTL database", checkpoint.SubtaskSnapshot{DBs: []checkpoint.DBFiles{db}}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, err := EncodeState(c.snap)
			if err != nil {
				t.Fatal(err)
			}
			if v := binary.BigEndian.Uint32(b[8:]); v != c.version {
				t.Fatalf("written as version %d, want %d", v, c.version)
			}
			got, err := DecodeState("f", b)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.snap) {
				t.Fatalf("decoded %+v, want %+v", got, c.snap)
			}
			again, err := EncodeState(got)
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("encodes back as %x, %v; want %x", again, err, b)
			}
			// The same payload under the wrong version is corrupt.
			wrong := uint32(3)
			if c.version == 3 {
				wrong = 2
			}
			p, _, _ := UnsealVersion("f", StateMagic, b)
			forged := SealVersion(StateMagic, wrong, append(NewEnvelope(len(p)), p...))
			if c.version == 1 {
				// A version 1 payload has no databases section: add an empty one.
				forged = SealVersion(StateMagic, wrong, append(append(NewEnvelope(len(p)+1), p...), 0))
			}
			if _, err := DecodeState("f", forged); !errors.Is(err, checkpoint.ErrCorrupt) {
				t.Fatalf("version %d payload as version %d: %v, want ErrCorrupt", c.version, wrong, err)
			}
		})
	}
	if Version < StateTTLVersion {
		t.Fatalf("Version %d does not read state files of version %d", Version, StateTTLVersion)
	}
}
