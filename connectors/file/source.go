// Package file reads newline-delimited records from files and writes them to
// files exactly once.
//
// [Source] reads each file as one split. [Sink] writes each checkpoint's
// records of each subtask to one hidden file, renames it to a pending name at
// the checkpoint barrier, and to its visible final name when the checkpoint
// completes; see [NewSink] for the file names and docs/sinks.md for the
// protocol. The sink does all of its file I/O through the internal
// filesystem layer internal/vfs, so that its tests can crash the filesystem
// after any operation; users always get the operating system's.
package file

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/exactlyonce/exactly/source"
)

// readBufferSize is the size of a reader's bufio buffer.
const readBufferSize = 64 << 10

// Source reads newline-delimited records from a fixed list of files. It
// implements [source.Source]. Each file is one split, whose id is the path
// as given to [NewSource], cleaned with [filepath.Clean].
//
// A record is a line without its "\n" and without a "\r" just before it; a
// last line without a newline is a record too. Empty lines are skipped. A
// split's position is the byte offset of the next unread line.
type Source[T any] struct {
	paths  []string
	decode func(line []byte) (T, error)
}

var _ source.Source[int] = (*Source[int])(nil)

// NewSource returns a source reading paths, decoding each record with
// decode. decode must not keep line after it returns, and must be safe for
// concurrent use. A decode error stops the read with an error that names the
// file, line and byte offset.
func NewSource[T any](paths []string, decode func(line []byte) (T, error)) (*Source[T], error) {
	if len(paths) == 0 {
		return nil, errors.New("file: NewSource: paths is empty: pass at least one file to read")
	}
	if decode == nil {
		return nil, errors.New("file: NewSource: decode is nil: pass a function that turns a line into a record")
	}
	cleaned := make([]string, len(paths))
	seen := make(map[string]int, len(paths))
	for i, p := range paths {
		if p == "" {
			return nil, fmt.Errorf("file: NewSource: paths[%d] is empty: pass a file path", i)
		}
		c := filepath.Clean(p)
		if j, dup := seen[c]; dup {
			return nil, fmt.Errorf("file: NewSource: paths[%d] %q names the same file as paths[%d] %q: list each file once", i, p, j, paths[j])
		}
		seen[c] = i
		cleaned[i] = c
	}
	return &Source[T]{paths: cleaned, decode: decode}, nil
}

// Splits returns the cleaned paths, in the order given to [NewSource].
func (s *Source[T]) Splits(context.Context) ([]string, error) {
	return append([]string(nil), s.paths...), nil
}

// Open opens the file split at position, a byte offset, or at its start when
// position is nil. The offset must be the start of a line.
func (s *Source[T]) Open(_ context.Context, split string, position []byte) (source.Reader[T], error) {
	known := false
	for _, p := range s.paths {
		known = known || p == split
	}
	if !known {
		return nil, fmt.Errorf("file: unknown split %q: use one of the ids returned by Splits (the cleaned paths)", split)
	}
	var offset uint64
	if position != nil {
		v, n := binary.Uvarint(position)
		if n <= 0 || n != len(position) {
			return nil, fmt.Errorf("file %s: position %x is not a uvarint byte offset: pass nil or a value returned by Reader.Position", split, position)
		}
		offset = v
	}
	f, err := os.Open(split)
	if err != nil {
		return nil, fmt.Errorf("file: open source file: %w", err)
	}
	if err := checkLineStart(f, offset); err != nil {
		f.Close()
		return nil, fmt.Errorf("file %s: cannot resume at byte offset %d: %w", split, offset, err)
	}
	return &reader[T]{
		path:   split,
		decode: s.decode,
		f:      f,
		br:     bufio.NewReaderSize(f, readBufferSize),
		offset: offset,
	}, nil
}

// checkLineStart verifies that offset starts a line of f or is its end (after
// a last line without a newline), and seeks f to it. A failure means the file changed since the position was taken.
func checkLineStart(f *os.File, offset uint64) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if offset > uint64(fi.Size()) {
		return fmt.Errorf("the file is only %d bytes long; was it replaced or truncated since the checkpoint?", fi.Size())
	}
	if offset > 0 && offset < uint64(fi.Size()) {
		var b [1]byte
		if _, err := f.ReadAt(b[:], int64(offset)-1); err != nil {
			return err
		}
		if b[0] != '\n' {
			return errors.New("the offset is not at the start of a line; was the file modified since the checkpoint?")
		}
	}
	_, err = f.Seek(int64(offset), io.SeekStart)
	return err
}

// reader reads one file.
type reader[T any] struct {
	path   string
	decode func([]byte) (T, error)
	f      *os.File
	br     *bufio.Reader
	offset uint64 // byte offset of the next unread line
	long   []byte // scratch for lines longer than the bufio buffer
	err    error  // sticky error: the reader never skips past a failure
}

// Read decodes up to len(buf) records. On a decode or I/O error it returns
// the records decoded before it together with the error, and returns the
// same error on every later call; Position stays at the failed line.
func (r *reader[T]) Read(_ context.Context, buf []T) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n := 0
	for n < len(buf) {
		line, err := r.readLine()
		if errors.Is(err, io.EOF) && len(line) == 0 {
			if n == 0 {
				return 0, io.EOF
			}
			return n, nil
		}
		if err != nil && !errors.Is(err, io.EOF) {
			r.err = fmt.Errorf("file %s: read at byte offset %d: %w", r.path, r.offset, err)
			return n, r.err
		}
		record := bytes.TrimSuffix(bytes.TrimSuffix(line, []byte{'\n'}), []byte{'\r'})
		if len(record) > 0 {
			v, err := r.decode(record)
			if err != nil {
				r.err = fmt.Errorf("file %s:%s (byte offset %d): decode: %w", r.path, r.lineNumber(), r.offset, err)
				return n, r.err
			}
			buf[n] = v
			n++
		}
		r.offset += uint64(len(line))
	}
	return n, nil
}

// readLine returns the next line including its newline, if any. The slice
// is valid until the next call.
func (r *reader[T]) readLine() ([]byte, error) {
	line, err := r.br.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	r.long = append(r.long[:0], line...)
	for err == bufio.ErrBufferFull {
		line, err = r.br.ReadSlice('\n')
		r.long = append(r.long, line...)
	}
	return r.long, err
}

// lineNumber returns the 1-based line number at r.offset as text, counting
// newlines from the start of the file. It runs only on the error path.
func (r *reader[T]) lineNumber() string {
	lines := 1
	sr := bufio.NewReaderSize(io.NewSectionReader(r.f, 0, int64(r.offset)), readBufferSize)
	for {
		chunk, err := sr.ReadSlice('\n')
		lines += bytes.Count(chunk, []byte{'\n'})
		if err != nil && err != bufio.ErrBufferFull {
			if err != io.EOF {
				return "?"
			}
			return fmt.Sprint(lines)
		}
	}
}

// Position returns the byte offset of the next unread line.
func (r *reader[T]) Position() []byte {
	return binary.AppendUvarint(nil, r.offset)
}

// Close closes the file.
func (r *reader[T]) Close() error {
	return r.f.Close()
}
