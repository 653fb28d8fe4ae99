package store

import (
	"bytes"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/exactlyonce/exactly/internal/vfs"
)

// TestWriteSharedLinksALocalFile: a local store given a file of its own
// filesystem (as the Pebble backend gives its database's files) makes the
// shared file a hard link to it instead of writing a copy, recorded with
// the size and checksum a copy has. From a reader that is not a file, from
// a file whose name is gone, and on a filesystem without links (an
// error-injecting one), it copies.
func TestWriteSharedLinksALocalFile(t *testing.T) {
	data := bytes.Repeat([]byte("exactly "), 3*linkedReadBytes/8+5) // several reads
	crc := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	noLinks := vfs.WithErrors(vfs.Default, func(op, name string) error { return nil })
	for _, c := range []struct {
		name   string
		fs     vfs.FS
		source func(t *testing.T, path string) io.ReadSeeker
		linked bool
	}{
		{"file", vfs.Default, openFile, true},
		{"reader", vfs.Default, func(*testing.T, string) io.ReadSeeker { return bytes.NewReader(data) }, false},
		{"name gone", vfs.Default, func(t *testing.T, path string) io.ReadSeeker {
			f := openFile(t, path)
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			return f
		}, false},
		{"no links", noLinks, openFile, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			src := filepath.Join(dir, "000042.sst")
			if err := os.WriteFile(src, data, 0o644); err != nil {
				t.Fatal(err)
			}
			srcInfo, err := os.Stat(src)
			if err != nil {
				t.Fatal(err)
			}
			s := mustOpen(t, filepath.Join(dir, "checkpoints"), Options{FS: c.fs})
			f, err := s.WriteShared(1, "db-000042.sst", c.source(t, src), int64(len(data)))
			if err != nil {
				t.Fatal(err)
			}
			if f.Size != int64(len(data)) || f.CRC32C != crc {
				t.Errorf("recorded %d bytes, CRC-32C %08x; want %d, %08x", f.Size, f.CRC32C, len(data), crc)
			}
			shared, err := os.Stat(filepath.Join(dir, "checkpoints", sharedDir, f.Name))
			if err != nil {
				t.Fatal(err)
			}
			if linked := os.SameFile(srcInfo, shared); linked != c.linked {
				t.Errorf("the shared file is the source's: %v, want %v", linked, c.linked)
			}
			got, err := readSharedBytes(s, s.Dir(1, "chk"), f)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("read back %d bytes (%v), want the %d written", len(got), err, len(data))
			}
		})
	}
}

func openFile(t *testing.T, path string) io.ReadSeeker {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
