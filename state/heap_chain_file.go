package state

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"

	"github.com/exactlyonce/exactly/internal/format"
)

// A file of a heap chain (see heap_chain.go) holds the blobs of the key
// groups of one subtask that have any, in increasing key-group order:
//
//	file  = version:byte groups:uvarint group*groups
//	group = kg:uvarint blob:bytes
//
// A chain's first file is a full snapshot: its blobs are those Snapshot
// writes. Each later file is a change set on top of the files before it:
// its blobs hold, per state, the whole entry of every key written since
// (a section of the state's kind) and the keys removed since (a section
// of kindRemoved under the same name). Change sets hold only value and
// map states without a TTL; a full snapshot may also hold timers.
const heapChainFileVersion = 1

// kindRemoved is the kind of a change set's section that lists the keys a
// state no longer holds; it appears only in heap chain files, never in a
// blob given to restore.
const kindRemoved = 0x40

// chainFile returns a reader of the heap chain file of the blobs of key
// groups, and its size. It reads the blobs where they are: a full
// snapshot's file is as large as the state, and is not copied whole.
func chainFile(blobs map[int][]byte) (io.ReadSeeker, int64) {
	kgs := slices.Sorted(maps.Keys(blobs))
	// The headers, the file's and each key group's (its number and its
	// blob's length), in one buffer that never grows: the parts alias it.
	headers := make([]byte, 0, (1+2*len(kgs))*binary.MaxVarintLen64)
	headers = format.AppendCount(append(headers, heapChainFileVersion), len(kgs))
	r := &partsReader{parts: [][]byte{headers}}
	for _, kg := range kgs {
		start := len(headers)
		headers = format.AppendCount(format.AppendCount(headers, kg), len(blobs[kg]))
		r.parts = append(r.parts, headers[start:], blobs[kg])
	}
	for _, p := range r.parts {
		r.size += int64(len(p))
	}
	return r, r.size
}

// chainWriter collects the blobs of a heap chain file, put in increasing
// key-group order: in memory up to limit bytes, then in a temporary file
// in dir (the system's temporary directory when empty), removed from the
// directory at once, so that a file as large as the state is not held in
// memory while it is written to the shared files. Close it when done.
type chainWriter struct {
	dir   string
	limit int
	kgs   []int    // the key groups held in memory, in order
	blobs [][]byte // their blobs
	size  int64    // bytes of the blobs put
	f     *os.File // nil until spilled
	w     *bufio.Writer
	n     int   // key groups put
	off   int64 // bytes written to f
}

// chainHeaderRoom is the room a spilled chain file keeps before its key
// groups for the file's header, written once their count is known.
const chainHeaderRoom = 1 + binary.MaxVarintLen64

func (c *chainWriter) put(kg int, blob []byte) error {
	c.n++
	c.size += int64(len(blob))
	if c.f == nil {
		c.kgs, c.blobs = append(c.kgs, kg), append(c.blobs, blob)
		if c.size < int64(c.limit) {
			return nil
		}
		return c.spill()
	}
	return c.writeGroup(kg, blob)
}

// spill moves the blobs held in memory into a new temporary file.
func (c *chainWriter) spill() error {
	f, err := tempFile(c.dir, "heapsnap-*")
	if err != nil {
		return fmt.Errorf("state: a heap snapshot larger than %d bytes is written to a temporary file first: %w", c.limit, err)
	}
	c.f, c.w, c.off = f, bufio.NewWriterSize(f, 1<<20), chainHeaderRoom
	if _, err := c.w.Write(make([]byte, chainHeaderRoom)); err != nil {
		return err
	}
	for i, kg := range c.kgs {
		if err := c.writeGroup(kg, c.blobs[i]); err != nil {
			return err
		}
	}
	c.kgs, c.blobs = nil, nil
	return nil
}

// tempFile creates a temporary file in dir (the system's temporary
// directory when empty), made if missing, and removes its name at once:
// the file lives until it is closed, whatever becomes of the process.
func tempFile(dir, pattern string) (*os.File, error) {
	if dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
	}
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(f.Name()); err != nil {
		return nil, errors.Join(err, f.Close())
	}
	return f, nil
}

func (c *chainWriter) writeGroup(kg int, blob []byte) error {
	var head [2 * binary.MaxVarintLen64]byte
	h := format.AppendCount(format.AppendCount(head[:0], kg), len(blob))
	if _, err := c.w.Write(h); err != nil {
		return err
	}
	if _, err := c.w.Write(blob); err != nil {
		return err
	}
	c.off += int64(len(h) + len(blob))
	return nil
}

// spilled reports whether the blobs went to a temporary file.
func (c *chainWriter) spilled() bool { return c.f != nil }

// inMemory returns the blobs by key group, when not spilled.
func (c *chainWriter) inMemory() map[int][]byte {
	out := make(map[int][]byte, len(c.kgs))
	for i, kg := range c.kgs {
		out[kg] = c.blobs[i]
	}
	return out
}

// file returns a reader of the chain file and its size.
func (c *chainWriter) file() (io.ReadSeeker, int64, error) {
	if c.f == nil {
		r, size := chainFile(c.inMemory())
		return r, size, nil
	}
	if err := c.w.Flush(); err != nil {
		return nil, 0, err
	}
	header := format.AppendCount([]byte{heapChainFileVersion}, c.n)
	start := int64(chainHeaderRoom - len(header))
	if _, err := c.f.WriteAt(header, start); err != nil {
		return nil, 0, err
	}
	return io.NewSectionReader(c.f, start, c.off-start), c.off - start, nil
}

// close removes the temporary file, if any.
func (c *chainWriter) close() error {
	if c.f == nil {
		return nil
	}
	return c.f.Close()
}

// partsReader reads byte slices one after the other as one stream, and
// seeks in it.
type partsReader struct {
	parts [][]byte
	size  int64
	off   int64 // in the stream
	idx   int   // the part that holds off
	in    int   // off within parts[idx]
}

func (r *partsReader) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && r.idx < len(r.parts) {
		c := copy(p[n:], r.parts[r.idx][r.in:])
		n, r.in, r.off = n+c, r.in+c, r.off+int64(c)
		if r.in == len(r.parts[r.idx]) {
			r.idx, r.in = r.idx+1, 0
		}
	}
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

func (r *partsReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.size
	}
	if offset < 0 {
		return r.off, fmt.Errorf("state: seeking to %d, before the start", offset)
	}
	r.off, r.idx, r.in = offset, 0, 0
	rest := offset
	for r.idx < len(r.parts) && rest >= int64(len(r.parts[r.idx])) {
		rest -= int64(len(r.parts[r.idx]))
		r.idx++
	}
	if r.idx < len(r.parts) {
		r.in = int(rest)
	}
	return r.off, nil
}

// chainFileReader reads the key groups of a heap chain file one at a time
// from a stream, checking the file's structure as it goes: a restore
// holds one key group's blob of each file at a time, not the files.
type chainFileReader struct {
	r      countingReader
	size   int64 // the file's size: no blob is longer than what is left
	groups int   // key groups left to read
	last   int   // the key group read last, -1 before the first
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r *bufio.Reader
	n int64
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
	}
	return b, err
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// newChainFileReader reads the header of the chain file of size bytes that
// r streams.
func newChainFileReader(r io.Reader, size int64) (*chainFileReader, error) {
	c := &chainFileReader{r: countingReader{r: bufio.NewReaderSize(r, 256<<10)}, size: size, last: -1}
	v, err := c.r.ReadByte()
	if err != nil || v != heapChainFileVersion {
		var got any = v
		if err != nil {
			got = "(empty)"
		}
		return nil, errors.Join(format.CorruptBlob("a heap snapshot file of version %v, this build reads version %d", got, heapChainFileVersion), ignoreEOF(err))
	}
	n, err := c.uvarint("its count of key groups")
	if err != nil {
		return nil, err
	}
	if n > MaxParallelismLimit {
		return nil, format.CorruptBlob("a heap snapshot file of %d key groups", n)
	}
	c.groups = int(n)
	return c, nil
}

// next returns the next key group and its blob; ok is false after the
// last, once the file was read to its end: bytes after it are an error,
// and so is an error of the stream (a shared file's checksum).
func (c *chainFileReader) next() (kg int, blob []byte, ok bool, err error) {
	if c.groups == 0 {
		if _, err := c.r.ReadByte(); err != io.EOF {
			if err == nil {
				return 0, nil, false, format.CorruptBlob("bytes after the last key group of a heap snapshot file")
			}
			return 0, nil, false, err
		}
		return 0, nil, false, nil
	}
	n, err := c.uvarint("a key group")
	if err != nil {
		return 0, nil, false, err
	}
	if n > MaxParallelismLimit {
		return 0, nil, false, format.CorruptBlob("key group %d in a heap snapshot file", n)
	}
	if kg = int(n); kg <= c.last {
		return 0, nil, false, format.CorruptBlob("key group %d after key group %d in a heap snapshot file", kg, c.last)
	}
	size, err := c.uvarint("the length of a blob")
	if err != nil {
		return 0, nil, false, err
	}
	if left := c.size - c.r.n; size > uint64(max(left, 0)) {
		return 0, nil, false, format.CorruptBlob("key group %d's blob of %d bytes in a heap snapshot file with %d bytes left", kg, size, left)
	}
	blob = make([]byte, size)
	if _, err := io.ReadFull(&c.r, blob); err != nil {
		return 0, nil, false, errors.Join(format.CorruptBlob("a heap snapshot file ends inside key group %d's blob", kg), ignoreEOF(err))
	}
	c.last, c.groups = kg, c.groups-1
	return kg, blob, true, nil
}

// uvarint reads a uvarint, what naming it in the error of a file that ends
// before it.
func (c *chainFileReader) uvarint(what string) (uint64, error) {
	n, err := binary.ReadUvarint(&c.r)
	if err != nil {
		return 0, errors.Join(format.CorruptBlob("a heap snapshot file ends inside %s, or it is not a uvarint", what), ignoreEOF(err))
	}
	return n, nil
}

// ignoreEOF returns err unless it says only that a stream ended, which the
// corruption error beside it says better: an error of the stream itself
// (a checksum, a failed download) is kept.
func ignoreEOF(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return err
}

// mergeChainBlobs merges the blobs one key group has in the files of a
// heap chain, oldest first, into the blob of a full snapshot that restore
// reads: each state's entries are those of the newest blob that wrote or
// removed their key. Only the first blob may hold timers, which are kept
// as they are.
func mergeChainBlobs(blobs [][]byte) ([]byte, error) {
	type section struct {
		name    string
		kind    byte
		keys    []string          // in first-written order, each once
		listed  map[string]bool   // the keys in keys
		entries map[string][]byte // the rest of each key's entry; absent: removed
		raw     []byte            // the entries of a timer section
		count   int               // the entries of a timer section
	}
	var sections []*section
	byName := make(map[string]*section)
	for i, blob := range blobs {
		r, err := format.NewBlobReader(blob)
		if err != nil {
			return nil, err
		}
		for r.More() {
			name, kind, count, err := r.Section(displayName)
			if err != nil {
				return nil, err
			}
			s := byName[name]
			if s == nil {
				s = &section{name: name, kind: kind, listed: make(map[string]bool), entries: make(map[string][]byte)}
				if kind == kindRemoved {
					s.kind = 0 // known once a change set writes an entry
				}
				byName[name] = s
				sections = append(sections, s)
			} else if kind != kindRemoved && s.kind != 0 && s.kind != kind {
				return nil, format.CorruptBlob("%s has kind %#x in one file of a heap snapshot and %#x in another", displayName(name), s.kind, kind)
			}
			if kind != kindRemoved && s.kind == 0 {
				s.kind = kind
			}
			switch stateKind(kind) {
			case kindTimers, kindEventTimers:
				if i > 0 {
					return nil, format.CorruptBlob("timers in a change set of a heap snapshot")
				}
				start := r.Rest()
				for range count {
					if _, err := r.Bytes(); err != nil {
						return nil, err
					}
					if _, err := r.Bytes(); err != nil {
						return nil, err
					}
				}
				s.raw, s.count = start[:len(start)-len(r.Rest())], count
			case kindValue, kindMap, kindRemoved:
				for range count {
					key, err := r.Bytes()
					if err != nil {
						return nil, err
					}
					start := r.Rest()
					if err := skipEntryRest(r, stateKind(kind)); err != nil {
						return nil, err
					}
					k := string(key)
					if !s.listed[k] && kind != kindRemoved {
						s.keys = append(s.keys, k)
						s.listed[k] = true
					}
					if kind == kindRemoved {
						delete(s.entries, k)
					} else {
						s.entries[k] = start[:len(start)-len(r.Rest())]
					}
				}
			default:
				return nil, format.CorruptBlob("%s has kind %#x, which a heap snapshot file does not hold", displayName(name), kind)
			}
		}
	}
	var out []byte
	for _, s := range sections {
		if s.raw != nil {
			out = format.AppendSection(out, s.name, s.kind, s.count, s.raw)
			continue
		}
		var entries []byte
		n := 0
		for _, k := range s.keys {
			rest, ok := s.entries[k]
			if !ok {
				continue
			}
			entries = format.AppendBytes(entries, []byte(k))
			entries = append(entries, rest...)
			n++
		}
		if n > 0 {
			out = format.AppendSection(out, s.name, s.kind, n, entries)
		}
	}
	if out == nil {
		return nil, nil
	}
	return out, nil
}

// skipEntryRest reads the rest of an entry of kind after its key: a
// value's value, a map's count and pairs, nothing for a removal.
func skipEntryRest(r *format.BlobReader, kind stateKind) error {
	switch kind {
	case kindValue:
		_, err := r.Bytes()
		return err
	case kindMap:
		n, err := r.Count()
		if err != nil {
			return err
		}
		for range 2 * n {
			if _, err := r.Bytes(); err != nil {
				return err
			}
		}
		return nil
	case kindRemoved:
		return nil
	}
	return fmt.Errorf("state: no entry format for kind %v", kind)
}
