// Package inspect tells what a checkpoint or savepoint holds, read offline
// from its storage: the sources' positions, the operators' state sizes
// per key group and the sinks' pending committables. It is the core of
// `exactly checkpoints ls|inspect`.
package inspect

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/checkpoint/store"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/sink"
)

// Summary is one line of a listing.
type Summary struct {
	ID          checkpoint.ID   `json:"id"`
	Kind        checkpoint.Kind `json:"kind"`
	Dir         string          `json:"dir"`
	Job         string          `json:"job"`
	Triggered   time.Time       `json:"triggered"`
	Completed   time.Time       `json:"completed"`
	StateBytes  int64           `json:"state_bytes"`
	Operators   int             `json:"operators"`
	EndOfInput  bool            `json:"end_of_input"`
	Incarnation string          `json:"incarnation"`
	Epoch       uint64          `json:"epoch"`
}

// Report is what one checkpoint holds.
type Report struct {
	Summary
	MaxParallelism int        `json:"max_parallelism"`
	Operators      []Operator `json:"operators"`
}

// Operator is one operator's part of a checkpoint.
type Operator struct {
	Name        string    `json:"name"`
	Parallelism int       `json:"parallelism"`
	Subtasks    []Subtask `json:"subtasks"`
}

// Subtask is what one subtask's state file holds.
type Subtask struct {
	Subtask int    `json:"subtask"`
	File    string `json:"file"`
	Size    int64  `json:"size"`
	// KeyGroupStart and KeyGroupEnd bound the key groups of a keyed
	// operator's subtask ([start, end)); both 0 otherwise.
	KeyGroupStart int `json:"key_group_start"`
	KeyGroupEnd   int `json:"key_group_end"`
	// KeyGroupBytes is the size of the heap state of each key group that
	// holds any.
	KeyGroupBytes map[int]int `json:"key_group_bytes,omitempty"`
	// DBs are the Pebble databases of an incremental snapshot.
	DBs []DB `json:"dbs,omitempty"`
	// Positions are a source's split positions.
	Positions []Position `json:"positions,omitempty"`
	// Committables are a sink's prepared transactions, committed once
	// the checkpoint completes (pending until then, and until a restore
	// from it commits them).
	Committables []Committable `json:"committables,omitempty"`
	// Watermark is a keyed operator's checkpointed watermark (UnixNano).
	Watermark *int64 `json:"watermark,omitempty"`
	// OtherEntries counts entries of no kind this package knows.
	OtherEntries int `json:"other_entries,omitempty"`
}

// DB is one database of an incremental snapshot.
type DB struct {
	KeyGroupStart int   `json:"key_group_start"`
	KeyGroupEnd   int   `json:"key_group_end"`
	Files         int   `json:"files"`
	Bytes         int64 `json:"bytes"`
}

// Position is a source split's position.
type Position struct {
	Split string `json:"split"`
	// Pos is the source's opaque position, in hex; Uvarint its value when
	// it is exactly one unsigned varint (a generator's count, a file's
	// offset).
	Pos     string  `json:"pos"`
	Uvarint *uint64 `json:"uvarint,omitempty"`
	Done    bool    `json:"done"`
}

// Committable is a sink's prepared transaction.
type Committable struct {
	Checkpoint  checkpoint.ID `json:"checkpoint"`
	Subtask     int           `json:"subtask"`
	Incarnation string        `json:"incarnation"`
	DataBytes   int           `json:"data_bytes"`
}

// List returns a summary of every completed checkpoint and savepoint of
// st, by increasing id; each is loaded and verified.
func List(st store.Storage) ([]Summary, error) {
	listed, err := st.List()
	if err != nil {
		return nil, err
	}
	out := []Summary{}
	for _, l := range listed {
		md, err := st.Load(l.Dir)
		if err != nil {
			return nil, fmt.Errorf("checkpoint %d (%s): %w", l.ID, l.Dir, err)
		}
		out = append(out, summarize(md, l.Dir))
	}
	return out, nil
}

func summarize(md *checkpoint.Metadata, dir string) Summary {
	return Summary{ID: md.ID, Kind: md.Kind, Dir: dir, Job: md.Job, Triggered: md.Triggered, Completed: md.Completed,
		StateBytes: md.StateBytes(), Operators: len(md.Operators), EndOfInput: md.EndOfInput, Incarnation: md.Incarnation, Epoch: md.Epoch}
}

// Find returns the directory of checkpoint or savepoint id in st; id 0
// means the latest.
func Find(st store.Storage, id checkpoint.ID) (string, error) {
	listed, err := st.List()
	if err != nil {
		return "", err
	}
	if len(listed) == 0 {
		return "", fmt.Errorf("%s holds no completed checkpoint", st.Location())
	}
	if id == 0 {
		return listed[len(listed)-1].Dir, nil
	}
	var ids []string
	for _, l := range listed {
		if l.ID == id {
			return l.Dir, nil
		}
		ids = append(ids, fmt.Sprint(l.ID))
	}
	return "", fmt.Errorf("%s holds no completed checkpoint %d: it holds %s", st.Location(), id, strings.Join(ids, ", "))
}

// Describe loads the checkpoint at dir of st and reads every state file.
func Describe(st store.Storage, dir string) (*Report, error) {
	md, err := st.Load(dir)
	if err != nil {
		return nil, err
	}
	r := &Report{Summary: summarize(md, dir), MaxParallelism: md.MaxParallelism}
	for _, op := range md.Operators {
		o := Operator{Name: op.Name, Parallelism: op.Parallelism}
		for _, h := range op.Subtasks {
			snap, err := st.ReadStateAt(dir, h)
			if err != nil {
				return nil, fmt.Errorf("operator %s subtask %d: %w", op.Name, h.Subtask, err)
			}
			o.Subtasks = append(o.Subtasks, describeSubtask(md, op, h, snap))
		}
		r.Operators = append(r.Operators, o)
	}
	return r, nil
}

func describeSubtask(md *checkpoint.Metadata, op checkpoint.OperatorState, h checkpoint.StateHandle, snap checkpoint.SubtaskSnapshot) Subtask {
	s := Subtask{Subtask: h.Subtask, File: h.File, Size: h.Size, KeyGroupStart: h.KeyGroupStart, KeyGroupEnd: h.KeyGroupEnd}
	if len(snap.KeyGroups) > 0 {
		s.KeyGroupBytes = map[int]int{}
		for kg, b := range snap.KeyGroups {
			s.KeyGroupBytes[kg] = len(b)
		}
	}
	for _, db := range snap.DBs {
		d := DB{KeyGroupStart: db.KeyGroupStart, KeyGroupEnd: db.KeyGroupEnd, Files: len(db.Files)}
		for _, f := range db.Files {
			d.Bytes += int64(len(f.Data)) + f.Shared.Size
		}
		s.DBs = append(s.DBs, d)
	}
	for _, e := range snap.Entries {
		if c, ok := asCommittable(md, op, e); ok {
			s.Committables = append(s.Committables, Committable{Checkpoint: c.Checkpoint, Subtask: c.Subtask, Incarnation: c.Incarnation, DataBytes: len(c.Data)})
			continue
		}
		if p, ok := asPosition(e); ok {
			pos := Position{Split: p.Split, Pos: hex.EncodeToString(p.Pos), Done: p.Done}
			if v, n := binary.Uvarint(p.Pos); n > 0 && n == len(p.Pos) {
				pos.Uvarint = &v
			}
			s.Positions = append(s.Positions, pos)
			continue
		}
		if wm, err := format.DecodeWatermark(e); err == nil {
			s.Watermark = &wm
			continue
		}
		s.OtherEntries++
	}
	slices.SortFunc(s.Positions, func(a, b Position) int { return strings.Compare(a.Split, b.Split) })
	return s
}

// asCommittable decodes e as a committable of this checkpoint's owner:
// its incarnation, one of the operator's subtasks, no later checkpoint.
// The checks tell it from a split position, which can start with the
// same bytes.
func asCommittable(md *checkpoint.Metadata, op checkpoint.OperatorState, e []byte) (sink.Committable, bool) {
	c, err := format.DecodeCommittable(e)
	if err != nil || c.Checkpoint > md.ID || c.Subtask >= op.Parallelism || c.Incarnation != md.Incarnation {
		return sink.Committable{}, false
	}
	return c, true
}

// asPosition decodes e as a split position with a printable split id.
func asPosition(e []byte) (format.SplitPosition, bool) {
	p, err := format.DecodeSplitPosition(e)
	if err != nil || p.Split == "" || !utf8.ValidString(p.Split) || strings.ContainsFunc(p.Split, func(r rune) bool { return r < ' ' }) {
		return format.SplitPosition{}, false
	}
	return p, true
}
