package format

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/exactlyonce/exactly/checkpoint"
)

// Version is the highest version of the store's files this build reads
// and writes: of the version field of every file envelope and of the
// format_version of the metadata; version 0 is corrupt. Files are written
// in the lowest version that holds their contents ([BaseVersion] unless
// they use what a later version added), so that a build that does not
// know a feature still reads the checkpoints that do not use it.
//
// It is [checkpoint.FormatVersion], which the coordinator writes into the
// metadata it builds: package checkpoint cannot import this package, which
// imports it for the types it encodes.
const Version = checkpoint.FormatVersion

// BaseVersion is the version of every file that uses nothing a later
// version added. Version 2 added the databases of incremental snapshots to
// state files and shared files to the metadata; version 3 added state with
// a TTL to state files ([StateTTLVersion]).
const BaseVersion = 1

// ErrNewerVersion marks an intact file written in a format version this build
// does not know, by a newer version of exactly. It is not corruption: the
// checkpoint is probably fine, and skipping it would silently roll the job
// back, so the store returns this error instead of falling back.
var ErrNewerVersion = errors.New("checkpoint/store: written by a newer version of exactly")

// CorruptFileError describes one corrupt file of the store. It wraps
// [checkpoint.ErrCorrupt] and, if set, Cause, the error that revealed the
// problem (such as fs.ErrNotExist).
type CorruptFileError struct {
	// Path is the file.
	Path string
	// Problem says what is wrong with it.
	Problem string
	// Cause is the error that revealed the problem, or nil.
	Cause error
}

// Error returns the file and the problem.
func (e *CorruptFileError) Error() string {
	return "checkpoint/store: corrupt checkpoint: " + e.Path + ": " + e.Problem
}

// Unwrap returns [checkpoint.ErrCorrupt] and Cause, if set.
func (e *CorruptFileError) Unwrap() []error {
	if e.Cause == nil {
		return []error{checkpoint.ErrCorrupt}
	}
	return []error{checkpoint.ErrCorrupt, e.Cause}
}

// Corruptf returns a [CorruptFileError] for path with the formatted problem.
func Corruptf(path, format string, args ...any) error {
	return &CorruptFileError{Path: path, Problem: fmt.Sprintf(format, args...)}
}

func newerVersion(path string, v uint64) error {
	return fmt.Errorf("%w: %s: format version %d, this build reads up to %d: upgrade exactly to restore it",
		ErrNewerVersion, path, v, Version)
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
	headerSize  = 8 + 4 + 8
	trailerSize = 4
	// EnvelopeSize is the size of an envelope around an empty payload: the
	// smallest file the store writes.
	EnvelopeSize = headerSize + trailerSize
)

// Magic is the first 8 bytes of a file of the store: the kind of file.
type Magic [8]byte

// The magic of each kind of file, NUL-padded.
var (
	MetadataMagic    = Magic{'E', 'X', 'M', 'E', 'T', 'A'}
	StateMagic       = Magic{'E', 'X', 'S', 'T', 'A', 'T', 'E'}
	IDsMagic         = Magic{'E', 'X', 'I', 'D', 'S'}
	OwnerMagic       = Magic{'E', 'X', 'O', 'W', 'N', 'E', 'R'}
	IncarnationMagic = Magic{'E', 'X', 'I', 'N', 'C'}
	ManifestMagic    = Magic{'E', 'X', 'M', 'A', 'N', 'I', 'F'}
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Checksum returns the CRC-32C (Castagnoli) of b: the envelope's checksum,
// and the one the metadata records for each state file.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// NewEnvelope returns a buffer with room for the header, to which the caller
// appends a payload of about payloadSize bytes before calling [Seal].
func NewEnvelope(payloadSize int) []byte {
	return make([]byte, headerSize, EnvelopeSize+payloadSize)
}

// Seal fills in the header of buf (from [NewEnvelope], payload appended)
// with magic m and [BaseVersion], and appends the checksum.
func Seal(m Magic, buf []byte) []byte { return SealVersion(m, BaseVersion, buf) }

// SealVersion is [Seal] with payload version v.
func SealVersion(m Magic, v uint32, buf []byte) []byte {
	copy(buf, m[:])
	binary.BigEndian.PutUint32(buf[8:], v)
	binary.BigEndian.PutUint64(buf[12:], uint64(len(buf)-headerSize))
	return binary.BigEndian.AppendUint32(buf, Checksum(buf))
}

// Unseal checks the envelope of file contents b read from path (magic,
// length, checksum, then version) and returns the payload, which shares b's
// memory. A version above [Version] is [ErrNewerVersion]; every other
// problem is a [CorruptFileError].
func Unseal(path string, m Magic, b []byte) ([]byte, error) {
	p, _, err := UnsealVersion(path, m, b)
	return p, err
}

// UnsealVersion is [Unseal] that also returns the payload's version.
func UnsealVersion(path string, m Magic, b []byte) ([]byte, uint32, error) {
	if len(b) < EnvelopeSize {
		return nil, 0, Corruptf(path, "file is %d bytes, shorter than the %d-byte envelope (truncated?)", len(b), EnvelopeSize)
	}
	if !bytes.Equal(b[:8], m[:]) {
		return nil, 0, Corruptf(path, "bad magic %q, want %q", b[:8], m[:])
	}
	if n, have := binary.BigEndian.Uint64(b[12:]), uint64(len(b)-EnvelopeSize); n != have {
		return nil, 0, Corruptf(path, "header says the payload is %d bytes but the file holds %d (truncated or extended)", n, have)
	}
	body := b[:len(b)-trailerSize]
	if want, got := binary.BigEndian.Uint32(b[len(body):]), Checksum(body); want != got {
		return nil, 0, Corruptf(path, "checksum mismatch: file says %08x, contents hash to %08x", want, got)
	}
	v := binary.BigEndian.Uint32(b[8:])
	switch {
	case v == 0:
		return nil, 0, Corruptf(path, "format version 0")
	case v > Version:
		return nil, 0, newerVersion(path, uint64(v))
	}
	return body[headerSize:], v, nil
}
