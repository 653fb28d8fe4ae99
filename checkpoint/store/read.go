package store

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// ReadState reads the state file h of checkpoint or savepoint id. It checks
// the file's size and checksum against h, then its envelope, before decoding
// anything; every problem with the file is an error wrapping ErrCorrupt
// that names it. The returned snapshot's blobs share one buffer.
func (s *Store) ReadState(id checkpoint.ID, kind checkpoint.Kind, h checkpoint.StateHandle) (checkpoint.SubtaskSnapshot, error) {
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
	if err := checkHandle(filepath.Join(dir, metadataFile), path, h); err != nil {
		return checkpoint.SubtaskSnapshot{}, err
	}
	b, err := s.readFile(path, h.Size)
	if err != nil {
		return checkpoint.SubtaskSnapshot{}, err
	}
	return decodeStateFile(path, b, h)
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
	_, completed, err := s.readIDs()
	if err != nil {
		return nil, err
	}
	return latestRules{
		where: s.dir, completed: completed, skipCorrupt: s.skipCorrupt, log: s.log, skipped: &s.skipped,
		neverCompleted: func(c candidate) bool {
			_, err := s.fs.Stat(filepath.Join(s.Dir(c.id, c.kind), metadataFile))
			return errors.Is(err, fs.ErrNotExist) && c.id > completed
		},
		load: func(c candidate) (*checkpoint.Metadata, error) { return s.load(s.Dir(c.id, c.kind), c.id, c.kind) },
	}.pick(all)
}

// List returns the checkpoints and savepoints of the directory whose
// metadata was written (completed), by increasing id.
func (s *Store) List() ([]Listed, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Listed
	for _, kind := range []checkpoint.Kind{checkpoint.KindCheckpoint, checkpoint.KindSavepoint} {
		ids, err := s.list(kind)
		if err != nil {
			return nil, err
		}
		for _, id := range ids {
			dir := s.Dir(id, kind)
			_, err := s.fs.Stat(filepath.Join(dir, metadataFile))
			if errors.Is(err, fs.ErrNotExist) {
				continue // never completed
			}
			if err != nil {
				return nil, ioErr("reading", dir, err)
			}
			out = append(out, Listed{ID: id, Kind: kind, Dir: dir})
		}
	}
	sortListed(out)
	return out, nil
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
	id, kind, err := parseCheckpointDir(path, filepath.Base(dir))
	if err != nil {
		return nil, err
	}
	if _, err := s.fs.Stat(dir); err != nil {
		return nil, fmt.Errorf("checkpoint/store: Load %s: %w", path, err)
	}
	return s.load(dir, id, kind)
}

// load reads and validates the checkpoint in dir, which should have the
// given id and kind, and all of its state files.
func (s *Store) load(dir string, id checkpoint.ID, kind checkpoint.Kind) (*checkpoint.Metadata, error) {
	path := filepath.Join(dir, metadataFile)
	b, err := s.readFile(path, -1)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &format.CorruptFileError{Path: path, Problem: "file is missing: the checkpoint never completed or its metadata was deleted", Cause: err}
	}
	if err != nil {
		return nil, err
	}
	m, err := validateLoaded(path, b, id, kind, func(h checkpoint.StateHandle) error {
		_, err := s.readState(dir, h)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := s.checkSharedPresent(dir, m); err != nil {
		return nil, err
	}
	return m, nil
}
