package store

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/internal/format"
)

// TestChecksumReaderRetry: an upload that is retried from the start (the
// S3 client seeks its body back) checksums the file once, and a source
// that yields less than announced is refused.
func TestChecksumReaderRetry(t *testing.T) {
	data := bytes.Repeat([]byte("pebble table "), 1000)
	src := newChecksumReader(bytes.NewReader(data))
	if _, err := io.CopyN(io.Discard, src, 777); err != nil {
		t.Fatal(err)
	}
	if pos, err := src.Seek(0, io.SeekCurrent); err != nil || pos != 777 {
		t.Fatalf("Seek(0, current) = %d, %v", pos, err)
	}
	if _, err := src.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, src); err != nil {
		t.Fatal(err)
	}
	f, err := src.sharedFile("x", int64(len(data)))
	if err != nil || f.Size != int64(len(data)) || f.CRC32C != format.Checksum(data) {
		t.Fatalf("after a retry: %+v, %v; want %d bytes, CRC %08x", f, err, len(data), format.Checksum(data))
	}
	if _, err := src.Seek(5, io.SeekStart); err == nil {
		t.Fatal("a seek into the middle was accepted")
	}
	short := newChecksumReader(bytes.NewReader(data[:10]))
	_, _ = io.Copy(io.Discard, short)
	if _, err := short.sharedFile("x", 11); err == nil || !strings.Contains(err.Error(), "10 bytes, 11 announced") {
		t.Fatalf("short source: %v", err)
	}
}
