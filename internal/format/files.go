package format

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/exactlyonce/exactly/checkpoint"
)

// EncodeMetadata returns the contents of a _metadata file holding m: the
// JSON of m in an envelope. The caller sets m.FormatVersion.
func EncodeMetadata(m checkpoint.Metadata) ([]byte, error) {
	return sealJSON(MetadataMagic, m)
}

// DecodeMetadata decodes the contents b of the _metadata file at path. A
// format_version above [Version] is [ErrNewerVersion], one below 1 corrupt.
func DecodeMetadata(path string, b []byte) (checkpoint.Metadata, error) {
	var m checkpoint.Metadata
	if err := unsealJSON(path, MetadataMagic, b, "metadata", &m); err != nil {
		return checkpoint.Metadata{}, err
	}
	switch {
	case m.FormatVersion > Version:
		return checkpoint.Metadata{}, newerVersion(path, uint64(m.FormatVersion))
	case m.FormatVersion < 1:
		return checkpoint.Metadata{}, Corruptf(path, "format_version %d", m.FormatVersion)
	case m.FormatVersion < MetadataVersion(m) && MetadataVersion(m) > BaseVersion:
		return checkpoint.Metadata{}, Corruptf(path, "format_version %d lists shared files, which need version %d", m.FormatVersion, MetadataVersion(m))
	}
	return m, nil
}

// MetadataVersion returns the lowest format_version that describes m:
// [BaseVersion], or 2 if a state handle lists shared files.
func MetadataVersion(m checkpoint.Metadata) int {
	for _, op := range m.Operators {
		for _, h := range op.Subtasks {
			if len(h.Shared) > 0 {
				return stateDBsVersion
			}
		}
	}
	return BaseVersion
}

// OwnerRecord is the payload of the _owner file: the current owner of a
// checkpoint directory.
type OwnerRecord struct {
	// Epoch is the owner's epoch, higher than every earlier owner's.
	Epoch uint64 `json:"epoch"`
	// Holder describes the owning process.
	Holder string `json:"holder"`
	// Renewed is when the lease was last renewed, in Unix nanoseconds.
	Renewed int64 `json:"renewed_unix_nano"`
	// LeaseNS is how long the lease lasts after Renewed, in nanoseconds.
	LeaseNS int64 `json:"lease_ns"`
	// Released is set when the owner gave the directory up.
	Released bool `json:"released"`
}

// EncodeOwner returns the contents of an _owner file holding r: its JSON in
// an envelope.
func EncodeOwner(r OwnerRecord) ([]byte, error) {
	return sealJSON(OwnerMagic, r)
}

// DecodeOwner decodes the contents b of the _owner file at path.
func DecodeOwner(path string, b []byte) (OwnerRecord, error) {
	var r OwnerRecord
	if err := unsealJSON(path, OwnerMagic, b, "the owner record", &r); err != nil {
		return OwnerRecord{}, err
	}
	return r, nil
}

// sealJSON returns v's JSON in an envelope with magic m.
func sealJSON(m Magic, v any) ([]byte, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Seal(m, append(NewEnvelope(len(payload)), payload...)), nil
}

// unsealJSON decodes the JSON payload of file contents b, read from path,
// into v; what names the payload in errors.
func unsealJSON(path string, m Magic, b []byte, what string, v any) error {
	p, err := Unseal(path, m, b)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(p, v); err != nil {
		return Corruptf(path, "decoding %s: %v", what, err)
	}
	return nil
}

// EncodeIDs returns the contents of an _ids file: the highest id reserved
// and the highest id that completed, each a big-endian uint64.
func EncodeIDs(reserved, completed checkpoint.ID) []byte {
	return Seal(IDsMagic, binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(NewEnvelope(16), uint64(reserved)), uint64(completed)))
}

// DecodeIDs decodes the contents b of the _ids file at path. Files written
// before the completed id was recorded hold only the reserved id: completed
// is then 0.
func DecodeIDs(path string, b []byte) (reserved, completed checkpoint.ID, err error) {
	p, err := Unseal(path, IDsMagic, b)
	if err == nil && len(p) != 8 && len(p) != 16 {
		err = Corruptf(path, "payload is %d bytes, want 8 or 16", len(p))
	}
	if err != nil {
		return 0, 0, err
	}
	if len(p) == 16 {
		completed = checkpoint.ID(binary.BigEndian.Uint64(p[8:]))
	}
	return checkpoint.ID(binary.BigEndian.Uint64(p)), completed, nil
}

// EncodeIncarnation returns the contents of an _incarnation file holding
// id, as raw bytes in an envelope.
func EncodeIncarnation(id string) []byte {
	return Seal(IncarnationMagic, append(NewEnvelope(len(id)), id...))
}

// DecodeIncarnation decodes the contents b of the _incarnation file at path.
func DecodeIncarnation(path string, b []byte) (string, error) {
	p, err := Unseal(path, IncarnationMagic, b)
	if err != nil {
		return "", err
	}
	return string(p), nil
}

// EncodeState returns the contents of a state file holding s.
//
// Payload: uvarint number of key groups, then for each key group in
// increasing order its uvarint number and uvarint-length-prefixed blob; then
// the uvarint number of entries, each uvarint-length-prefixed.
func EncodeState(s checkpoint.SubtaskSnapshot) ([]byte, error) {
	groups := slices.Sorted(maps.Keys(s.KeyGroups))
	if len(groups) > 0 && (groups[0] < 0 || groups[len(groups)-1] > math.MaxInt32) {
		return nil, fmt.Errorf("checkpoint/store: snapshot has key groups %d..%d: key groups must be in [0, %d]",
			groups[0], groups[len(groups)-1], math.MaxInt32)
	}
	size := uvarintLen(uint64(len(groups))) + uvarintLen(uint64(len(s.Entries)))
	for _, g := range groups {
		size += uvarintLen(uint64(g)) + bytesLen(s.KeyGroups[g])
	}
	for _, e := range s.Entries {
		size += bytesLen(e)
	}
	buf := NewEnvelope(size)
	buf = binary.AppendUvarint(buf, uint64(len(groups)))
	for _, g := range groups {
		buf = binary.AppendUvarint(buf, uint64(g))
		buf = AppendBytes(buf, s.KeyGroups[g])
	}
	buf = binary.AppendUvarint(buf, uint64(len(s.Entries)))
	for _, e := range s.Entries {
		buf = AppendBytes(buf, e)
	}
	version := stateVersion(s)
	if version == BaseVersion {
		return Seal(StateMagic, buf), nil
	}
	buf, err := appendDBs(buf, s.DBs)
	if err != nil {
		return nil, err
	}
	return SealVersion(StateMagic, uint32(version), buf), nil
}

// StateTTLVersion is the version of a state file that holds state with a
// TTL: a key-group blob of version [StateBlobTTLVersion], or a database
// state whose kind has [KindTTL] set. Its payload is that of version 2
// (the databases section is always present, possibly empty). State files
// without TTL state keep their version, 1 or 2.
const StateTTLVersion = 3

// stateVersion returns the lowest version of a state file that holds s.
func stateVersion(s checkpoint.SubtaskSnapshot) int {
	if hasTTL(s) {
		return StateTTLVersion
	}
	if len(s.DBs) > 0 {
		return stateDBsVersion
	}
	return BaseVersion
}

// hasTTL reports whether s holds state with a TTL.
func hasTTL(s checkpoint.SubtaskSnapshot) bool {
	for _, blob := range s.KeyGroups {
		if len(blob) > 0 && blob[0] == StateBlobTTLVersion {
			return true
		}
	}
	for _, db := range s.DBs {
		for _, st := range db.States {
			if st.Kind&KindTTL != 0 {
				return true
			}
		}
	}
	return false
}

// DecodeState decodes the contents b of the state file at path. The
// returned blobs share b's memory. Empty key groups and entries decode as
// nil. Only the encoding EncodeState writes is accepted (uvarints in their
// shortest form, key groups increasing, nothing after the last entry or,
// in versions 2 and 3, the last database; version 3 exactly when the file
// holds state with a TTL), so that what decodes encodes back to the same
// bytes.
func DecodeState(path string, b []byte) (checkpoint.SubtaskSnapshot, error) {
	p, version, err := UnsealVersion(path, StateMagic, b)
	if err != nil {
		return checkpoint.SubtaskSnapshot{}, err
	}
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
	if version >= stateDBsVersion {
		s.DBs = d.dbs()
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d unexpected bytes after the last entry", len(d.b))
	}
	if d.err == nil && (version == StateTTLVersion) != hasTTL(s) {
		d.fail("version %d state file, but state with a TTL needs version %d and only it", version, StateTTLVersion)
	}
	if d.err != nil {
		return checkpoint.SubtaskSnapshot{}, Corruptf(path, "state payload: %v", d.err)
	}
	return s, nil
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// decoder reads a state file's payload; after the first error it reads
// nothing.
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
