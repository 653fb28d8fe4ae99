package format

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
)

// stateDBsVersion is the version of a state file that holds databases
// (incremental snapshots); state files without them stay at BaseVersion.
//
// After the entries, a version 2 payload holds:
//
//	dbs:uvarint db*dbs
//	db     = start:uvarint end:uvarint states:uvarint state*states files:uvarint file*files
//	state  = name:bytes kind:byte id:uvarint
//	file   = name:bytes where:byte (inline: data:bytes | shared: shared:bytes size:uvarint crc32c:uint32)
//
// Key groups [start, end) with start < end <= 2^31-1; state names and ids
// distinct; file names plain (see validDBFileName), strictly increasing.
const stateDBsVersion = 2

// Where a database file is kept.
const (
	dbFileInline byte = 1
	dbFileShared byte = 2
)

// appendDBs appends the databases section of a version 2 state file.
func appendDBs(buf []byte, dbs []checkpoint.DBFiles) ([]byte, error) {
	buf = binary.AppendUvarint(buf, uint64(len(dbs)))
	for i, db := range dbs {
		if err := checkDB(db); err != nil {
			return nil, fmt.Errorf("checkpoint/store: database %d of the snapshot: %w", i, err)
		}
		buf = binary.AppendUvarint(buf, uint64(db.KeyGroupStart))
		buf = binary.AppendUvarint(buf, uint64(db.KeyGroupEnd))
		buf = binary.AppendUvarint(buf, uint64(len(db.States)))
		for _, st := range db.States {
			buf = AppendBytes(buf, []byte(st.Name))
			buf = append(buf, st.Kind)
			buf = binary.AppendUvarint(buf, uint64(st.ID))
		}
		buf = binary.AppendUvarint(buf, uint64(len(db.Files)))
		for _, f := range db.Files {
			buf = AppendBytes(buf, []byte(f.Name))
			if f.Shared.Name == "" {
				buf = append(buf, dbFileInline)
				buf = AppendBytes(buf, f.Data)
				continue
			}
			buf = append(buf, dbFileShared)
			buf = AppendBytes(buf, []byte(f.Shared.Name))
			buf = binary.AppendUvarint(buf, uint64(f.Shared.Size))
			buf = binary.BigEndian.AppendUint32(buf, f.Shared.CRC32C)
		}
	}
	return buf, nil
}

// checkDB checks what the decoder would reject, so that nothing is written
// that cannot be read back.
func checkDB(db checkpoint.DBFiles) error {
	if db.KeyGroupStart < 0 || db.KeyGroupStart >= db.KeyGroupEnd || db.KeyGroupEnd > math.MaxInt32 {
		return fmt.Errorf("key group range [%d, %d) is empty or out of range", db.KeyGroupStart, db.KeyGroupEnd)
	}
	names, ids := map[string]bool{}, map[uint32]bool{}
	for _, st := range db.States {
		if names[st.Name] || ids[st.ID] {
			return fmt.Errorf("state %q (id %d) is listed twice", st.Name, st.ID)
		}
		names[st.Name], ids[st.ID] = true, true
	}
	for i, f := range db.Files {
		if !validDBFileName(f.Name) || i > 0 && db.Files[i-1].Name >= f.Name {
			return fmt.Errorf("file name %q is not a plain name in increasing order", f.Name)
		}
		if f.Shared.Name != "" && (!ValidSharedName(f.Shared.Name) || f.Shared.Size < 0) {
			return fmt.Errorf("file %q: shared file %q (size %d) is not valid", f.Name, f.Shared.Name, f.Shared.Size)
		}
	}
	return nil
}

// validDBFileName reports whether name is a plain file name, as Pebble's
// files are.
func validDBFileName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`+"\x00")
}

// sharedIDDigits is the length of the checkpoint id that starts the name of
// every shared file.
const sharedIDDigits = 20

// SharedName returns the name of the shared file uploaded for checkpoint id
// under key: the id in 20 digits, '-', key.
func SharedName(id checkpoint.ID, key string) string {
	return fmt.Sprintf("%0*d-%s", sharedIDDigits, id, key)
}

// SharedID returns the id of the checkpoint that uploaded the shared file
// called name; ok is false for a name SharedName did not make.
func SharedID(name string) (id checkpoint.ID, ok bool) {
	if len(name) < sharedIDDigits+2 || name[sharedIDDigits] != '-' {
		return 0, false
	}
	if strings.ContainsAny(name[:sharedIDDigits], "+-") {
		return 0, false
	}
	v, err := strconv.ParseUint(name[:sharedIDDigits], 10, 64)
	return checkpoint.ID(v), err == nil
}

// ValidSharedName reports whether name is a shared file's name: made by
// SharedName with a plain key of letters, digits, '-', '_' and '.'.
func ValidSharedName(name string) bool {
	if _, ok := SharedID(name); !ok {
		return false
	}
	key := name[sharedIDDigits+1:]
	return key != "" && !strings.HasPrefix(key, ".") && strings.IndexFunc(key, func(c rune) bool {
		return !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.')
	}) < 0
}

// dbs reads the databases section of a version 2 state file.
func (d *decoder) dbs() []checkpoint.DBFiles {
	// A database takes at least 4 bytes (start, end, two counts).
	n := d.count("database", 4)
	var dbs []checkpoint.DBFiles
	for range n {
		db := d.db()
		if d.err != nil {
			return nil
		}
		if err := checkDB(db); err != nil {
			d.fail("database %d: %v", len(dbs), err)
			return nil
		}
		dbs = append(dbs, db)
	}
	return dbs
}

func (d *decoder) db() checkpoint.DBFiles {
	var db checkpoint.DBFiles
	db.KeyGroupStart = d.keyGroup("database key group start")
	db.KeyGroupEnd = d.keyGroup("database key group end")
	// A state takes at least 3 bytes, a file at least 3.
	for range d.count("state", 3) {
		st := checkpoint.DBState{Name: string(d.blob()), Kind: d.byte("state kind")}
		id := d.uvarint("state id")
		if id > math.MaxUint32 {
			d.fail("state id %d out of range", id)
		}
		st.ID = uint32(id)
		if d.err != nil {
			return db
		}
		db.States = append(db.States, st)
	}
	for range d.count("file", 3) {
		f := checkpoint.DBFile{Name: string(d.blob())}
		switch where := d.byte("file location"); where {
		case dbFileInline:
			f.Data = d.blob()
		case dbFileShared:
			f.Shared.Name = string(d.blob())
			size := d.uvarint("shared file size")
			if size > math.MaxInt64 {
				d.fail("shared file size %d out of range", size)
			}
			f.Shared.Size = int64(size)
			f.Shared.CRC32C = d.uint32("shared file checksum")
			if d.err == nil && f.Shared.Name == "" {
				d.fail("file %q: empty shared file name", f.Name)
			}
		default:
			d.fail("file %q: unknown location %d", f.Name, where)
		}
		if d.err != nil {
			return db
		}
		db.Files = append(db.Files, f)
	}
	return db
}

func (d *decoder) keyGroup(what string) int {
	v := d.uvarint(what)
	if d.err == nil && v > math.MaxInt32 {
		d.fail("%s %d out of range", what, v)
	}
	return int(v)
}

func (d *decoder) byte(what string) byte {
	if d.err == nil && len(d.b) < 1 {
		d.fail("truncated %s", what)
	}
	if d.err != nil {
		return 0
	}
	b := d.b[0]
	d.b = d.b[1:]
	return b
}

func (d *decoder) uint32(what string) uint32 {
	if d.err == nil && len(d.b) < 4 {
		d.fail("truncated %s", what)
	}
	if d.err != nil {
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

// SharedFilesOf returns the shared files the databases refer to, sorted by
// name, each once: what a state handle lists.
func SharedFilesOf(dbs []checkpoint.DBFiles) []checkpoint.SharedFile {
	var out []checkpoint.SharedFile
	for _, db := range dbs {
		for _, f := range db.Files {
			if f.Shared.Name != "" {
				out = append(out, f.Shared)
			}
		}
	}
	slices.SortFunc(out, func(a, b checkpoint.SharedFile) int { return strings.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b checkpoint.SharedFile) bool { return a == b })
}
