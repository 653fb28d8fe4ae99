package format

import (
	"encoding/binary"
	"fmt"

	"github.com/exactlyonce/exactly/checkpoint"
)

// StateBlobVersion is the first byte of every keyed-state blob without a
// section of a state with a TTL, the state of one key group of a keyed
// operator (see package state):
//
//	blob    = version:byte section*
//	section = name:bytes kind:byte count:uvarint entry*count
//	bytes   = len:uvarint byte*len
//
// What an entry holds depends on the section's kind; package state writes
// and reads the entries with [AppendBytes], [AppendCount], [AppendInt64],
// [BlobReader.Bytes], [BlobReader.Count] and [BlobReader.Int64].
const StateBlobVersion = 1

// StateBlobTTLVersion is the first byte of a keyed-state blob that holds a
// section of a state with a TTL (a kind with [KindTTL] set), whose entries
// carry expiry times. Blobs without one stay at [StateBlobVersion], so that
// builds that know only version 1 still read them.
const StateBlobTTLVersion = 2

// KindTTL is set in the kind of a section whose entries carry their expiry
// time (package state: a value, map or list state declared with a TTL). It
// needs blob version [StateBlobTTLVersion]; in a state file it needs state
// file version [StateTTLVersion].
const KindTTL byte = 0x80

// CorruptBlob returns an error about a malformed keyed-state blob, wrapping
// [checkpoint.ErrCorrupt] and the errors format and args wrap (%w).
func CorruptBlob(format string, args ...any) error {
	return fmt.Errorf("state: corrupt snapshot blob: %w: %w", checkpoint.ErrCorrupt, fmt.Errorf(format, args...))
}

// AppendCount appends n as a uvarint: the count of a section, a map or a
// list in a keyed-state blob.
func AppendCount(dst []byte, n int) []byte {
	return binary.AppendUvarint(dst, uint64(n))
}

// AppendSection appends a section of count entries, encoded in entries, to
// blob, the blob of one key group so far: nil before its first section,
// which then starts it with StateBlobVersion. A section whose kind has
// KindTTL set raises the blob's version to StateBlobTTLVersion.
func AppendSection(blob []byte, name string, kind byte, count int, entries []byte) []byte {
	if blob == nil {
		blob = []byte{StateBlobVersion}
	}
	if kind&KindTTL != 0 {
		blob[0] = StateBlobTTLVersion
	}
	blob = AppendBytes(blob, []byte(name))
	blob = append(blob, kind)
	blob = AppendCount(blob, count)
	return append(blob, entries...)
}

// SectionHeaderRoom is the most bytes the header that AppendSection
// writes before the first section of a blob named name takes: the
// version, the name, the kind and the count.
func SectionHeaderRoom(name string) int {
	return 1 + binary.MaxVarintLen64 + len(name) + 1 + binary.MaxVarintLen64
}

// PutFirstSection makes a blob of one section, in place, out of buf,
// whose first SectionHeaderRoom(name) bytes are free and whose rest holds
// the section's count entries: it writes the header that AppendSection
// would write right before the entries and returns the blob, from the
// header's first byte to buf's end. It is AppendSection(nil, name, kind,
// count, entries) without copying the entries.
func PutFirstSection(buf []byte, name string, kind byte, count int) []byte {
	room := SectionHeaderRoom(name)
	h := AppendSection(nil, name, kind, count, nil)
	start := room - len(h)
	copy(buf[start:room], h)
	return buf[start:]
}

// AppendInt64 appends v as 8 bytes, big-endian: an expiry time in a
// keyed-state blob.
func AppendInt64(dst []byte, v int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(v))
}

// BlobReader reads a keyed-state blob; the byte strings it returns alias
// the blob.
type BlobReader struct {
	version byte
	src     []byte // unread rest of the blob
}

// NewBlobReader checks the version of blob and returns a reader of its
// sections.
func NewBlobReader(blob []byte) (*BlobReader, error) {
	if len(blob) == 0 {
		return nil, CorruptBlob("empty blob")
	}
	if blob[0] != StateBlobVersion && blob[0] != StateBlobTTLVersion {
		return nil, CorruptBlob("format version %d, this build reads versions %d and %d: restore with the version of exactly that wrote the checkpoint, or a newer one", blob[0], StateBlobVersion, StateBlobTTLVersion)
	}
	return &BlobReader{version: blob[0], src: blob[1:]}, nil
}

// FieldReader returns a reader of the fields of src, a sequence of counts
// and byte strings written with [AppendCount] and [AppendBytes] that has
// no version byte; it aliases src.
func FieldReader(src []byte) *BlobReader { return &BlobReader{src: src} }

// Rest returns the bytes not read yet; it aliases the blob.
func (r *BlobReader) Rest() []byte { return r.src }

// More reports whether another section follows.
func (r *BlobReader) More() bool { return len(r.src) > 0 }

// Section reads the header of the next section: its name, kind and number
// of entries. display renders a section name in errors.
func (r *BlobReader) Section(display func(name string) string) (name string, kind byte, count int, err error) {
	nameBytes, err := r.Bytes()
	if err != nil {
		return "", 0, 0, err
	}
	name = string(nameBytes)
	if len(r.src) == 0 {
		return "", 0, 0, CorruptBlob("%s: missing kind", display(name))
	}
	kind = r.src[0]
	r.src = r.src[1:]
	if kind&KindTTL != 0 && r.version < StateBlobTTLVersion {
		return "", 0, 0, CorruptBlob("%s: kind %#x carries expiry times, which need blob version %d, not %d", display(name), kind, StateBlobTTLVersion, r.version)
	}
	if count, err = r.Count(); err != nil {
		return "", 0, 0, fmt.Errorf("%s: %w", display(name), err)
	}
	return name, kind, count, nil
}

// Count reads a uvarint count, bounded by the bytes left so that corrupt
// counts cannot cause huge allocations (every counted item takes at least
// one byte).
func (r *BlobReader) Count() (int, error) {
	n, w := binary.Uvarint(r.src)
	if w <= 0 {
		return 0, CorruptBlob("bad count")
	}
	r.src = r.src[w:]
	if n > uint64(len(r.src)) {
		return 0, CorruptBlob("count %d exceeds the %d bytes left", n, len(r.src))
	}
	return int(n), nil
}

// Uvarint reads a uvarint that counts nothing (an index).
func (r *BlobReader) Uvarint() (uint64, error) {
	n, w := binary.Uvarint(r.src)
	if w <= 0 {
		return 0, CorruptBlob("bad number")
	}
	r.src = r.src[w:]
	return n, nil
}

// Bytes reads a length-prefixed byte string.
func (r *BlobReader) Bytes() ([]byte, error) {
	n, w := binary.Uvarint(r.src)
	if w <= 0 {
		return nil, CorruptBlob("bad length")
	}
	r.src = r.src[w:]
	if n > uint64(len(r.src)) {
		return nil, CorruptBlob("length %d exceeds the %d bytes left", n, len(r.src))
	}
	b := r.src[:n]
	r.src = r.src[n:]
	return b, nil
}

// Int64 reads 8 bytes, big-endian: an expiry time.
func (r *BlobReader) Int64() (int64, error) {
	if len(r.src) < 8 {
		return 0, CorruptBlob("truncated expiry time: %d bytes left", len(r.src))
	}
	v := int64(binary.BigEndian.Uint64(r.src))
	r.src = r.src[8:]
	return v, nil
}
