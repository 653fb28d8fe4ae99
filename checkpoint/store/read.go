package store

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// ReadState reads the state file h of checkpoint or savepoint id. It checks
// the file's size and checksum against h, then its envelope, before decoding
// anything; every problem with the file is an error wrapping ErrCorrupt
// that names it. The returned snapshot's blobs share one buffer.
func (s *Store) ReadState(id uint64, kind checkpoint.Kind, h checkpoint.StateHandle) (checkpoint.SubtaskSnapshot, error) {
	if err := checkKind(kind); err != nil {
		return checkpoint.SubtaskSnapshot{}, err
	}
	return s.readState(s.Dir(id, kind), h)
}

// ReadStateAt is ReadState for the checkpoint or savepoint in directory dir,
// which may belong to another store (a savepoint given to [Store.Load]).
func (s *Store) ReadStateAt(dir string, h checkpoint.StateHandle) (checkpoint.SubtaskSnapshot, error) {
	return s.readState(filepath.Clean(dir), h)
}

func (s *Store) readState(dir string, h checkpoint.StateHandle) (checkpoint.SubtaskSnapshot, error) {
	path := filepath.Join(dir, h.File)
	if !validStateFile(h.File) {
		return checkpoint.SubtaskSnapshot{}, format.Corruptf(filepath.Join(dir, metadataFile), "state file name %q of subtask %d is not a plain file name", h.File, h.Subtask)
	}
	if h.Size < format.EnvelopeSize {
		return checkpoint.SubtaskSnapshot{}, format.Corruptf(path, "recorded size %d is smaller than the %d-byte envelope", h.Size, format.EnvelopeSize)
	}
	b, err := s.readFile(path, h.Size)
	if err != nil {
		return checkpoint.SubtaskSnapshot{}, err
	}
	if got := format.Checksum(b); got != h.CRC32C {
		return checkpoint.SubtaskSnapshot{}, format.Corruptf(path, "checksum mismatch: the metadata records %08x, the file hashes to %08x", h.CRC32C, got)
	}
	return format.DecodeState(path, b)
}

// Latest returns the metadata of the newest valid completed checkpoint or
// savepoint of this store, or nil, nil if there is none. Savepoints count:
// sinks commit when a savepoint completes, so restoring an older checkpoint
// after it would replay committed output.
//
// Each candidate is fully validated, its state files included (every one is
// read and checked). The rules, newest candidate first:
//
//   - A checkpoint without metadata and above the completed id recorded in
//     _ids never completed (the normal trace of a crash): it is skipped,
//     logged at INFO. One at or below it lost its metadata: corrupt.
//   - A checkpoint whose metadata exists — it completed, and sinks may have
//     committed its output — but whose metadata or state files do not
//     verify stops the search with an error wrapping ErrCorrupt that names
//     the file and the choices, unless Options.SkipCorrupt is set: then it
//     is skipped with a loud warning and counted ([Store.Skipped]).
//   - A directory whose _ids records a completed checkpoint but that holds
//     none any more is not treated as empty: the error says so (with
//     SkipCorrupt, the job starts from scratch, with a warning).
//   - Other errors (I/O errors, a checkpoint written by a newer version)
//     are returned: falling back on them would silently restore older state.
func (s *Store) Latest() (*checkpoint.Metadata, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	type candidate struct {
		id   uint64
		kind checkpoint.Kind
	}
	var all []candidate
	for _, kind := range []checkpoint.Kind{checkpoint.KindCheckpoint, checkpoint.KindSavepoint} {
		ids, err := s.list(kind)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			all = append(all, candidate{id, kind})
		}
	}
	slices.SortFunc(all, func(a, b candidate) int { return cmp.Compare(b.id, a.id) })
	_, completed, err := s.readIDs()
	if err != nil {
		return nil, err
	}
	var skipped []string
	for _, c := range all {
		dir := s.Dir(c.id, c.kind)
		if _, err := s.fs.Stat(filepath.Join(dir, metadataFile)); errors.Is(err, fs.ErrNotExist) && c.id > completed {
			s.log.Info("checkpoint/store: skipping a checkpoint that never completed", "id", c.id, "kind", c.kind, "dir", dir)
			continue
		}
		m, err := s.load(dir, c.id, c.kind)
		ce, corrupt := errors.AsType[*format.CorruptFileError](err)
		if !corrupt {
			return m, err
		}
		if !s.skipCorrupt {
			return nil, fmt.Errorf("%w. %s %d completed (its metadata was written), so sinks may have committed its output, and falling back to an older checkpoint would write that output again. "+
				"Restore the file from a backup and start again; or set SkipCorruptCheckpoints to fall back to the newest checkpoint that verifies, accepting duplicates of what was committed after it; or start from a savepoint with RestoreFrom",
				err, c.kind, c.id)
		}
		s.skipped.Add(1)
		skipped = append(skipped, fmt.Sprint(c.id))
		s.log.Warn("checkpoint/store: SKIPPING A CORRUPT COMPLETED CHECKPOINT (SkipCorruptCheckpoints is set): output committed after the checkpoint restored will be written again",
			"id", c.id, "kind", c.kind, "file", ce.Path, "problem", ce.Problem)
	}
	if completed > 0 {
		if !s.skipCorrupt {
			return nil, fmt.Errorf("checkpoint/store: %s: %w: the directory recorded completed checkpoints up to id %d in %s, but holds no valid one (skipped: [%s]); starting from scratch would write all output again. "+
				"Restore the checkpoint directory from a backup; or start from a savepoint with RestoreFrom; or set SkipCorruptCheckpoints to start from scratch on purpose",
				s.dir, ErrCorrupt, completed, idsFile, strings.Join(skipped, " "))
		}
		s.log.Warn("checkpoint/store: NO VALID CHECKPOINT LEFT (SkipCorruptCheckpoints is set): starting from scratch; all output will be written again",
			"dir", s.dir, "last_completed", completed)
	}
	return nil, nil
}

// Skipped returns how many corrupt completed checkpoints [Store.Latest]
// skipped under Options.SkipCorrupt.
func (s *Store) Skipped() int64 { return s.skipped.Load() }

// Load loads and fully validates the checkpoint or savepoint in directory
// path (a chk-… or sp-… directory, or its _metadata file), for instance to
// restore from a savepoint. The directory may belong to another store.
// Errors name the path and the problem; corruption wraps ErrCorrupt.
func (s *Store) Load(path string) (*checkpoint.Metadata, error) {
	dir := filepath.Clean(path)
	if filepath.Base(dir) == metadataFile {
		dir = filepath.Dir(dir)
	}
	base := filepath.Base(dir)
	kind := checkpoint.KindCheckpoint
	id, ok := parseDirName(base, chkPrefix)
	if !ok {
		kind = checkpoint.KindSavepoint
		id, ok = parseDirName(base, spPrefix)
	}
	if !ok {
		return nil, fmt.Errorf("checkpoint/store: Load %s: not a checkpoint or savepoint directory: pass a directory named %s<%d digits> or %s<%d digits>",
			path, chkPrefix, idDigits, spPrefix, idDigits)
	}
	if _, err := s.fs.Stat(dir); err != nil {
		return nil, fmt.Errorf("checkpoint/store: Load %s: %w", path, err)
	}
	return s.load(dir, id, kind)
}

// load reads and validates the checkpoint in dir, which should have the
// given id and kind, and all of its state files.
func (s *Store) load(dir string, id uint64, kind checkpoint.Kind) (*checkpoint.Metadata, error) {
	path := filepath.Join(dir, metadataFile)
	b, err := s.readFile(path, -1)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &format.CorruptFileError{Path: path, Problem: "file is missing: the checkpoint never completed or its metadata was deleted", Cause: err}
	}
	if err != nil {
		return nil, err
	}
	m, err := format.DecodeMetadata(path, b)
	if err != nil {
		return nil, err
	}
	switch {
	case m.ID != id:
		return nil, format.Corruptf(path, "records id %d but the directory is for id %d", m.ID, id)
	case m.Kind != kind:
		return nil, format.Corruptf(path, "records kind %q but the directory is for a %s", m.Kind, kind)
	}
	files := map[string]bool{}
	for _, op := range m.Operators {
		for _, h := range op.Subtasks {
			if files[h.File] {
				return nil, format.Corruptf(path, "state file %q is referenced twice", h.File)
			}
			files[h.File] = true
			if _, err := s.readState(dir, h); err != nil {
				return nil, err
			}
		}
	}
	return &m, nil
}
