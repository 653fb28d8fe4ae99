package file

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/source"
)

func decodeString(line []byte) (string, error) { return string(line), nil }

// writeFile writes content to a new file in a temporary directory.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func openSplit[T any](t *testing.T, s *Source[T], split string, pos []byte) source.Reader[T] {
	t.Helper()
	r, err := s.Open(context.Background(), split, pos)
	if err != nil {
		t.Fatalf("Open(%q, %x): %v", split, pos, err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// readAll reads r to EOF with a buffer of bufLen records, returning the
// records and the position after each Read.
func readAll[T any](t *testing.T, r source.Reader[T], bufLen int) (records []T, positions [][]byte, reads int) {
	t.Helper()
	buf := make([]T, bufLen)
	for {
		n, err := r.Read(context.Background(), buf)
		if errors.Is(err, io.EOF) {
			return records, positions, reads
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		reads++
		records = append(records, buf[:n]...)
		positions = append(positions, r.Position())
	}
}

func TestSourceLineEndings(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"LF", "a\nbb\nccc\n", []string{"a", "bb", "ccc"}},
		{"CRLF", "a\r\nbb\r\nccc\r\n", []string{"a", "bb", "ccc"}},
		{"no trailing newline", "a\nbb\nccc", []string{"a", "bb", "ccc"}},
		{"CR only at end", "a\nb\r", []string{"a", "b"}},
		{"empty lines skipped", "\na\n\r\n\nb\n\n", []string{"a", "b"}},
		{"empty file", "", nil},
		{"inner CR kept", "a\rb\n", []string{"a\rb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.content)
			s, err := NewSource([]string{path}, decodeString)
			if err != nil {
				t.Fatal(err)
			}
			got, _, _ := readAll(t, openSplit(t, s, path, nil), 10)
			if !slices.Equal(got, tc.want) {
				t.Errorf("records = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestSourceResumeAtEveryPosition(t *testing.T) {
	content := "one\r\ntwo\n\nthree\nfour\r\n\r\nfive\nsix"
	path := writeFile(t, content)
	s, err := NewSource([]string{path}, decodeString)
	if err != nil {
		t.Fatal(err)
	}
	all, positions, _ := readAll(t, openSplit(t, s, path, nil), 1)
	if want := []string{"one", "two", "three", "four", "five", "six"}; !slices.Equal(all, want) {
		t.Fatalf("records = %q, want %q", all, want)
	}
	for i, pos := range positions {
		rest, _, _ := readAll(t, openSplit(t, s, path, pos), 2)
		if !slices.Equal(rest, all[i+1:]) {
			t.Errorf("resumed after record %d at %x: got %q, want %q", i, pos, rest, all[i+1:])
		}
	}
}

func TestSourceLargeFileInSeveralReads(t *testing.T) {
	var b strings.Builder
	const lines = 50000
	for i := range lines {
		fmt.Fprintf(&b, "%d\n", i)
	}
	// One line longer than the bufio buffer.
	long := strings.Repeat("x", 3*readBufferSize)
	b.WriteString(long + "\n")
	path := writeFile(t, b.String())
	s, err := NewSource([]string{path}, decodeString)
	if err != nil {
		t.Fatal(err)
	}
	got, positions, reads := readAll(t, openSplit(t, s, path, nil), 1000)
	if len(got) != lines+1 || got[lines] != long || got[12345] != "12345" {
		t.Fatalf("read %d records, want %d", len(got), lines+1)
	}
	if reads != lines/1000+1 {
		t.Errorf("reads = %d, want %d", reads, lines/1000+1)
	}
	last := positions[len(positions)-1]
	if off, _ := binary.Uvarint(last); off != uint64(b.Len()) {
		t.Errorf("final position %d, want file size %d", off, b.Len())
	}
	// Resume mid-way from a Read boundary.
	rest, _, _ := readAll(t, openSplit(t, s, path, positions[9]), 777)
	if !slices.Equal(rest, got[10000:]) {
		t.Errorf("resume from position after 10 reads differs")
	}
}

func TestSourceDecodeErrorNamesFileAndLine(t *testing.T) {
	path := writeFile(t, "1\n2\n\nx\n4\n")
	bad := errors.New("not a number")
	s, err := NewSource([]string{path}, func(line []byte) (int, error) {
		n, err := strconv.Atoi(string(line))
		if err != nil {
			return 0, bad
		}
		return n, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	r := openSplit(t, s, path, nil)
	buf := make([]int, 10)
	n, err := r.Read(context.Background(), buf)
	if n != 2 || !slices.Equal(buf[:2], []int{1, 2}) {
		t.Errorf("Read returned %d records %v before the error, want [1 2]", n, buf[:n])
	}
	want := path + ":4 (byte offset 5)"
	if !errors.Is(err, bad) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v does not wrap the decoder's error and name %q", err, want)
	}
	if _, again := r.Read(context.Background(), buf); again != err {
		t.Errorf("second Read = %v, want the same sticky error", again)
	}
	// Resumed after the good lines, the error still names the right line.
	r2 := openSplit(t, s, path, r.Position())
	if _, err := r2.Read(context.Background(), buf); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("resumed Read error = %v, want it to name %q", err, want)
	}
}

func TestSourceOpenErrors(t *testing.T) {
	path := writeFile(t, "abc\ndef\n")
	missing := filepath.Join(t.TempDir(), "missing.txt")
	s, err := NewSource([]string{path, missing}, decodeString)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		split string
		pos   []byte
		want  string
	}{
		{missing, nil, missing},
		{"other", nil, "unknown split"},
		{path, []byte{0x80}, "not a uvarint"},
		{path, []byte{2}, "not at the start of a line"},
		{path, []byte{9}, "only 8 bytes long"},
	} {
		if _, err := s.Open(context.Background(), tc.split, tc.pos); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q, %x) = %v, want an error containing %q", tc.split, tc.pos, err, tc.want)
		}
	}
}

func TestNewSourceValidation(t *testing.T) {
	for _, tc := range []struct {
		paths []string
		want  string
	}{
		{nil, "paths is empty"},
		{[]string{"a", ""}, "paths[1] is empty"},
		{[]string{"a/b", "a/./b"}, `paths[1] "a/./b" names the same file as paths[0]`},
	} {
		if _, err := NewSource(tc.paths, decodeString); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("NewSource(%q) = %v, want an error containing %q", tc.paths, err, tc.want)
		}
	}
	if _, err := NewSource[string]([]string{"a"}, nil); err == nil {
		t.Error("NewSource with nil decode succeeded")
	}
	s, err := NewSource([]string{"x/../b.txt", "./c.txt"}, decodeString)
	if err != nil {
		t.Fatal(err)
	}
	if ids, _ := s.Splits(context.Background()); !slices.Equal(ids, []string{"b.txt", "c.txt"}) {
		t.Errorf("Splits = %q", ids)
	}
}
