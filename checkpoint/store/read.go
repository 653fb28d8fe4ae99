package store

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"github.com/exactlyonce/exactly/checkpoint"
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
		return checkpoint.SubtaskSnapshot{}, corruptf(filepath.Join(dir, metadataFile), "state file name %q of subtask %d is not a plain file name", h.File, h.Subtask)
	}
	if h.Size < envelopeSize {
		return checkpoint.SubtaskSnapshot{}, corruptf(path, "recorded size %d is smaller than the %d-byte envelope", h.Size, envelopeSize)
	}
	b, err := s.readFile(path, h.Size)
	if err != nil {
		return checkpoint.SubtaskSnapshot{}, err
	}
	if got := checksum(b); got != h.CRC32C {
		return checkpoint.SubtaskSnapshot{}, corruptf(path, "checksum mismatch: the metadata records %08x, the file hashes to %08x", h.CRC32C, got)
	}
	p, err := unseal(path, stateMagic, b)
	if err != nil {
		return checkpoint.SubtaskSnapshot{}, err
	}
	return decodeState(path, p)
}

// Latest returns the metadata of the newest valid completed checkpoint or
// savepoint of this store, or nil, nil if there is none. Savepoints count:
// sinks commit when a savepoint completes, so restoring an older checkpoint
// after it would replay committed output.
//
// Each candidate is fully validated, its state files included (every one is
// read and checked). A checkpoint with a missing, truncated or corrupt
// metadata or state file, including one that never completed, is skipped
// with a warning naming the file and the problem, and the next older one is
// tried. Other errors (I/O errors, a checkpoint written by a newer version)
// are returned: falling back on them would silently restore older state.
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
	for _, c := range all {
		id := c.id
		m, err := s.load(s.Dir(id, c.kind), id, c.kind)
		if ce, ok := errors.AsType[*corruptError](err); ok {
			s.log.Warn("checkpoint/store: skipping invalid checkpoint, falling back to an older one",
				"id", id, "file", ce.path, "problem", ce.problem)
			continue
		}
		return m, err
	}
	return nil, nil
}

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
		return nil, &corruptError{path: path, problem: "file is missing: the checkpoint never completed or its metadata was deleted", cause: err}
	}
	if err != nil {
		return nil, err
	}
	p, err := unseal(path, metadataMagic, b)
	if err != nil {
		return nil, err
	}
	var m checkpoint.Metadata
	if err := json.Unmarshal(p, &m); err != nil {
		return nil, corruptf(path, "decoding metadata: %v", err)
	}
	switch {
	case m.FormatVersion > FormatVersion:
		return nil, newerVersion(path, uint64(m.FormatVersion))
	case m.FormatVersion < 1:
		return nil, corruptf(path, "format_version %d", m.FormatVersion)
	case m.ID != id:
		return nil, corruptf(path, "records id %d but the directory is for id %d", m.ID, id)
	case m.Kind != kind:
		return nil, corruptf(path, "records kind %q but the directory is for a %s", m.Kind, kind)
	}
	files := map[string]bool{}
	for _, op := range m.Operators {
		for _, h := range op.Subtasks {
			if files[h.File] {
				return nil, corruptf(path, "state file %q is referenced twice", h.File)
			}
			files[h.File] = true
			if _, err := s.readState(dir, h); err != nil {
				return nil, err
			}
		}
	}
	return &m, nil
}
