package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"maps"
	"math"
	"slices"

	"github.com/exactlyonce/exactly/checkpoint"
)

// ErrCorrupt marks every error about a checkpoint file that is missing,
// truncated, fails its checksum or cannot be decoded. It is
// [checkpoint.ErrCorrupt]. Test with errors.Is.
var ErrCorrupt = checkpoint.ErrCorrupt

// ErrNewerVersion marks an intact file written in a format version this build
// does not know, by a newer version of exactly. It is not corruption: the
// checkpoint is probably fine, and skipping it would silently roll the job
// back, so [Store.Latest] returns this error instead of falling back.
var ErrNewerVersion = errors.New("checkpoint/store: written by a newer version of exactly")

// FormatVersion is the version of [checkpoint.Metadata] and of the file
// envelope this package writes. It is the highest version it reads.
const FormatVersion = 1

// corruptError describes one corrupt file. It wraps ErrCorrupt and, if
// set, the error that revealed the problem (such as fs.ErrNotExist).
type corruptError struct {
	path    string
	problem string
	cause   error
}

func (e *corruptError) Error() string {
	return "checkpoint/store: corrupt checkpoint: " + e.path + ": " + e.problem
}

func (e *corruptError) Unwrap() []error {
	if e.cause == nil {
		return []error{ErrCorrupt}
	}
	return []error{ErrCorrupt, e.cause}
}

func corruptf(path, format string, args ...any) error {
	return &corruptError{path: path, problem: fmt.Sprintf(format, args...)}
}

func newerVersion(path string, v uint64) error {
	return fmt.Errorf("%w: %s: format version %d, this build reads up to %d: upgrade exactly to restore it",
		ErrNewerVersion, path, v, FormatVersion)
}

// The envelope shared by every file the store writes:
//
//	magic    [8]byte  identifies the kind of file
//	version  uint32   format version of the payload
//	length   uint64   payload length in bytes
//	payload  [length]byte
//	crc      uint32   CRC-32C (Castagnoli) of everything before it
//
// Integers are big-endian. The envelope's layout never changes between
// versions, only the payload's encoding does, so a reader can tell an intact
// file of a newer version (checksum fine, version unknown) from a corrupt one.
const (
	headerSize   = 8 + 4 + 8
	trailerSize  = 4
	envelopeSize = headerSize + trailerSize
)

type magic [8]byte

var (
	metadataMagic    = magic{'E', 'X', 'M', 'E', 'T', 'A'}
	stateMagic       = magic{'E', 'X', 'S', 'T', 'A', 'T', 'E'}
	idsMagic         = magic{'E', 'X', 'I', 'D', 'S'}
	ownerMagic       = magic{'E', 'X', 'O', 'W', 'N', 'E', 'R'}
	incarnationMagic = magic{'E', 'X', 'I', 'N', 'C'}
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// newEnvelope returns a buffer with room for the header, to which the caller
// appends a payload of about payloadSize bytes before calling seal.
func newEnvelope(payloadSize int) []byte {
	return make([]byte, headerSize, envelopeSize+payloadSize)
}

// seal fills in the header of buf (from newEnvelope, payload appended) and
// appends the checksum.
func seal(m magic, buf []byte) []byte {
	copy(buf, m[:])
	binary.BigEndian.PutUint32(buf[8:], FormatVersion)
	binary.BigEndian.PutUint64(buf[12:], uint64(len(buf)-headerSize))
	return binary.BigEndian.AppendUint32(buf, checksum(buf))
}

// unseal checks the envelope of file contents b read from path (magic,
// length, checksum, then version) and returns the payload.
func unseal(path string, m magic, b []byte) ([]byte, error) {
	if len(b) < envelopeSize {
		return nil, corruptf(path, "file is %d bytes, shorter than the %d-byte envelope (truncated?)", len(b), envelopeSize)
	}
	if !bytes.Equal(b[:8], m[:]) {
		return nil, corruptf(path, "bad magic %q, want %q", b[:8], m[:])
	}
	if n, have := binary.BigEndian.Uint64(b[12:]), uint64(len(b)-envelopeSize); n != have {
		return nil, corruptf(path, "header says the payload is %d bytes but the file holds %d (truncated or extended)", n, have)
	}
	body := b[:len(b)-trailerSize]
	if want, got := binary.BigEndian.Uint32(b[len(body):]), checksum(body); want != got {
		return nil, corruptf(path, "checksum mismatch: file says %08x, contents hash to %08x", want, got)
	}
	switch v := binary.BigEndian.Uint32(b[8:]); {
	case v == 0:
		return nil, corruptf(path, "format version 0")
	case v > FormatVersion:
		return nil, newerVersion(path, uint64(v))
	}
	return body[headerSize:], nil
}

// encodeState returns the contents of a state file holding s.
//
// Payload: uvarint number of key groups, then for each key group in
// increasing order its uvarint number and uvarint-length-prefixed blob; then
// the uvarint number of entries, each uvarint-length-prefixed.
func encodeState(s checkpoint.SubtaskSnapshot) ([]byte, error) {
	groups := slices.Sorted(maps.Keys(s.KeyGroups))
	if len(groups) > 0 && (groups[0] < 0 || groups[len(groups)-1] > math.MaxInt32) {
		return nil, fmt.Errorf("checkpoint/store: snapshot has key groups %d..%d: key groups must be in [0, %d]",
			groups[0], groups[len(groups)-1], math.MaxInt32)
	}
	size := uvarintLen(uint64(len(groups))) + uvarintLen(uint64(len(s.Entries)))
	for _, g := range groups {
		size += uvarintLen(uint64(g)) + blobLen(s.KeyGroups[g])
	}
	for _, e := range s.Entries {
		size += blobLen(e)
	}
	buf := newEnvelope(size)
	buf = binary.AppendUvarint(buf, uint64(len(groups)))
	for _, g := range groups {
		buf = binary.AppendUvarint(buf, uint64(g))
		buf = appendBlob(buf, s.KeyGroups[g])
	}
	buf = binary.AppendUvarint(buf, uint64(len(s.Entries)))
	for _, e := range s.Entries {
		buf = appendBlob(buf, e)
	}
	return seal(stateMagic, buf), nil
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func blobLen(b []byte) int { return uvarintLen(uint64(len(b))) + len(b) }

func appendBlob(buf, b []byte) []byte {
	return append(binary.AppendUvarint(buf, uint64(len(b))), b...)
}

// decodeState decodes the payload of the state file at path. The returned
// blobs share p's memory. Empty key groups and entries decode as nil.
func decodeState(path string, p []byte) (checkpoint.SubtaskSnapshot, error) {
	d := decoder{b: p}
	var s checkpoint.SubtaskSnapshot
	// Every key group takes at least 2 bytes, every entry at least 1: bound
	// the counts by what is left before allocating for them.
	if n := d.count("key group", 2); n > 0 {
		s.KeyGroups = make(map[int][]byte, n)
		prev := -1
		for range n {
			g := d.uvarint("key group number")
			if d.err == nil && (g > math.MaxInt32 || int(g) <= prev) {
				d.fail("key group %d out of order or out of range after %d", g, prev)
			}
			b := d.blob()
			if d.err != nil {
				break
			}
			prev = int(g)
			s.KeyGroups[prev] = b
		}
	}
	if n := d.count("entry", 1); n > 0 {
		s.Entries = make([][]byte, 0, n)
		for range n {
			b := d.blob()
			if d.err != nil {
				break
			}
			s.Entries = append(s.Entries, b)
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d unexpected bytes after the last entry", len(d.b))
	}
	if d.err != nil {
		return checkpoint.SubtaskSnapshot{}, corruptf(path, "state payload: %v", d.err)
	}
	return s, nil
}

// decoder reads uvarint-encoded data; after the first error it reads nothing.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) uvarint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || n != uvarintLen(v) { // only the shortest encoding is valid
		d.fail("bad or truncated %s at %d bytes from the end", what, len(d.b))
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a number of items of at least minSize bytes each.
func (d *decoder) count(what string, minSize int) int {
	n := d.uvarint(what + " count")
	if d.err == nil && n > uint64(len(d.b)/minSize) {
		d.fail("%s count %d exceeds the %d bytes left", what, n, len(d.b))
	}
	if d.err != nil {
		return 0
	}
	return int(n)
}

func (d *decoder) blob() []byte {
	n := d.uvarint("length")
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail("length %d exceeds the %d bytes left", n, len(d.b))
	}
	if d.err != nil || n == 0 {
		return nil
	}
	b := d.b[:n:n]
	d.b = d.b[n:]
	return b
}
