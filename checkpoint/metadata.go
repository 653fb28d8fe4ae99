package checkpoint

import (
	"errors"
	"io"
	"time"
)

// ErrCorrupt marks every error about checkpoint data that is missing,
// truncated, fails its checksum or cannot be decoded, wherever it is found:
// in the checkpoint store's files (checkpoint/store) or in the state blobs
// inside them (package state). It is the one corruption vocabulary of the
// engine: the job driver stops at once on it instead of restarting, because
// a restart reads the same bytes again. Test with errors.Is.
var ErrCorrupt = errors.New("corrupt checkpoint data")

// FormatVersion is the newest version of the checkpoint format the engine
// writes and reads (the metadata's format_version and the version of the
// store's files; see docs/checkpoint-format.md). Version 2 added shared
// files (incremental checkpoints); a checkpoint that uses none is still
// written as version 1. Version 3 added keyed state with a TTL, which only
// state files record (as version 3): the metadata keeps the version its
// own contents need.
const FormatVersion = 3

// Kind tells a checkpoint from a savepoint.
type Kind string

const (
	// KindCheckpoint is a periodic checkpoint, removed under the retention policy.
	KindCheckpoint Kind = "checkpoint"
	// KindSavepoint is a user-requested snapshot that is never removed by the engine.
	KindSavepoint Kind = "savepoint"
)

// Metadata describes a completed checkpoint or savepoint. Once its file is
// durably written the checkpoint is complete; the state files it names must
// all exist and match their checksums.
type Metadata struct {
	// FormatVersion is the on-disk format version of this metadata.
	FormatVersion int `json:"format_version"`
	// ID is the checkpoint id; ids never repeat within one checkpoint directory.
	ID ID `json:"id"`
	// Kind is checkpoint or savepoint.
	Kind Kind `json:"kind"`
	// Job is the job's name.
	Job string `json:"job"`
	// Incarnation is the random id of the checkpoint directory's
	// incarnation that took the checkpoint; empty in older checkpoints.
	Incarnation string `json:"incarnation,omitempty"`
	// Epoch is the epoch of the owner that took it; 0 in older checkpoints.
	Epoch uint64 `json:"epoch,omitempty"`
	// EndOfInput is true for the final checkpoint of a job whose sources
	// all finished: the job is done, and starting it again from this
	// checkpoint runs nothing.
	EndOfInput bool `json:"end_of_input,omitempty"`
	// MaxParallelism is the job's number of key groups.
	MaxParallelism int `json:"max_parallelism"`
	// Triggered is when the checkpoint was triggered (wall clock, informational).
	Triggered time.Time `json:"triggered"`
	// Completed is when every subtask had acknowledged (wall clock, informational).
	Completed time.Time `json:"completed"`
	// Operators holds the state of every stateful operator, by name.
	Operators []OperatorState `json:"operators"`
}

// OperatorState is the state of one operator across its subtasks.
type OperatorState struct {
	// Name is the operator's unique, stable name in the job.
	Name string `json:"name"`
	// Parallelism is the operator's parallelism when the checkpoint was taken.
	Parallelism int `json:"parallelism"`
	// Subtasks holds one entry per subtask that has state, by subtask index.
	Subtasks []StateHandle `json:"subtasks"`
}

// StateBytes returns the size of the checkpoint's state files.
func (m *Metadata) StateBytes() int64 {
	var n int64
	for _, op := range m.Operators {
		for _, h := range op.Subtasks {
			n += h.Size
		}
	}
	return n
}

// StateHandle points at the state file of one subtask of one operator.
type StateHandle struct {
	// Subtask is the subtask index.
	Subtask int `json:"subtask"`
	// KeyGroupStart and KeyGroupEnd bound the key groups the subtask owned,
	// [KeyGroupStart, KeyGroupEnd). Both are 0 for non-keyed operators.
	KeyGroupStart int `json:"key_group_start"`
	KeyGroupEnd   int `json:"key_group_end"`
	// File is the state file's name, relative to the checkpoint's directory.
	File string `json:"file"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// CRC32C is the Castagnoli checksum of the whole file.
	CRC32C uint32 `json:"crc32c"`
	// Shared lists the shared files the state file refers to (those of an
	// incremental snapshot of the Pebble backend), sorted by name; empty
	// for full snapshots. The storage derives from these lists which
	// shared files the retained checkpoints still need.
	Shared []SharedFile `json:"shared,omitempty"`
}

// SharedFile is a file kept once in the checkpoint storage's shared
// directory and referred to by every checkpoint that needs it.
type SharedFile struct {
	// Name is the file's name in the shared directory: the id of the
	// checkpoint that uploaded it, 20 digits, then '-' and a name unique
	// within that checkpoint.
	Name string `json:"name"`
	// Size is the file's length in bytes.
	Size int64 `json:"size"`
	// CRC32C is the Castagnoli checksum of the file.
	CRC32C uint32 `json:"crc32c"`
}

// SubtaskSnapshot is what one subtask of one operator contributes to a checkpoint.
type SubtaskSnapshot struct {
	// KeyGroups holds keyed state, one opaque blob per key group.
	KeyGroups map[int][]byte
	// Entries holds non-keyed operator state (source positions, sink
	// committables). On restore every subtask receives the entries of all
	// former subtasks and keeps what it owns.
	Entries [][]byte
	// DBs holds keyed state kept as the files of a database (an
	// incremental snapshot of the Pebble backend): a snapshot holds at
	// most one; what a subtask restores holds those of every former
	// subtask whose key groups overlap its own.
	DBs []DBFiles
}

// IsEmpty reports whether the snapshot holds no state at all.
func (s SubtaskSnapshot) IsEmpty() bool {
	return len(s.KeyGroups) == 0 && len(s.Entries) == 0 && len(s.DBs) == 0
}

// DBFiles is the keyed state of one subtask as the files of its Pebble
// database at a checkpoint: large immutable files are shared files of the
// checkpoint storage, small ones are kept in the state file.
type DBFiles struct {
	// KeyGroupStart and KeyGroupEnd bound the key groups the database
	// holds, [KeyGroupStart, KeyGroupEnd).
	KeyGroupStart int
	KeyGroupEnd   int
	// States names the database's states: which id and kind each
	// registered state had.
	States []DBState
	// Files are the database's files, sorted by name.
	Files []DBFile
}

// DBState is one registered state of a database.
type DBState struct {
	// Name is the state's name.
	Name string
	// Kind is the state's kind as in keyed-state blobs (1 value, 2 map,
	// 3 list).
	Kind byte
	// ID is the state's id in the database's keys.
	ID uint32
}

// DBFile is one file of a database: either in the shared directory
// (Shared.Name set) or kept inline (Data).
type DBFile struct {
	// Name is the file's name in the database directory.
	Name string
	// Shared is the shared file holding it; its Name is empty for an
	// inline file.
	Shared SharedFile
	// Data is the contents of an inline file.
	Data []byte
}

// SharedFiles is the shared directory of a job's checkpoint storage, as
// the keyed-state backends see it: they upload the files of incremental
// snapshots and read back those of the checkpoint they restore.
type SharedFiles interface {
	// WriteShared stores the size bytes of r, streaming, as a shared file
	// for checkpoint id, named after id and key (unique within the
	// checkpoint), and returns it; r may be read again from its start on
	// a retry. It is not durable before the checkpoint completes. When r
	// is an *os.File, a storage on the same filesystem may make the shared
	// file a hard link to it instead of a copy: its contents must never
	// change (the Pebble backend's tables and blob files do not).
	WriteShared(id ID, key string, r io.ReadSeeker, size int64) (SharedFile, error)
	// ReadShared streams a shared file of the checkpoint being restored to
	// w and checks it against f's size and checksum: a missing or
	// different file is an error wrapping ErrCorrupt that names it. On
	// error w may hold part of the file: discard it.
	ReadShared(f SharedFile, w io.Writer) error
	// Reusable reports whether the shared files of the checkpoint being
	// restored are in the storage WriteShared writes to, so that the next
	// checkpoints may refer to them instead of uploading them again.
	Reusable() bool
}
