package store

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/vfs"
)

// DefaultRetained is the number of completed checkpoints kept when
// Options.Retained is 0.
const DefaultRetained = 3

// maxMetadataSize bounds how much of a _metadata file is read: a larger one
// is corrupt rather than a reason to exhaust memory.
const maxMetadataSize = 256 << 20

// Options configures a Store. The zero value selects every default.
type Options struct {
	// FS is the filesystem the store uses. Default: vfs.Default, the
	// operating system's. Tests pass an in-memory or error-injecting one.
	FS vfs.FS
	// Retained is how many completed checkpoints are kept; older ones are
	// removed when a newer one completes. Savepoints are never removed.
	// Default DefaultRetained (3); it must be at least 1. Keep more than 1 so
	// that a corrupt newest checkpoint leaves an older one to fall back to.
	Retained int
	// Logger receives warnings about checkpoints skipped as corrupt and about
	// failures to remove old checkpoints. Default: slog.Default().
	Logger *slog.Logger
	// SkipCorrupt makes [Store.Latest] fall back past completed checkpoints
	// that do not verify, with a loud warning each, instead of failing.
	// Default false: a completed checkpoint's output may already be
	// committed, and falling back to an older one writes it again.
	SkipCorrupt bool
	// RequestTimeout bounds each request to object storage (an
	// [ObjectStore]), plus the time its bytes take at MinTransferRate; a
	// slower one fails, and the checkpoint or restore that made it is
	// retried. Default DefaultRequestTimeout (30s).
	RequestTimeout time.Duration
	// MinTransferRate is the slowest transfer, in bytes per second, that a
	// request moving an object's bytes to or from object storage may take
	// before it fails: a request moving n bytes gets RequestTimeout +
	// n/MinTransferRate, so a large object of state is not cut off by a
	// timeout sized for the small ones. Default DefaultMinTransferRate
	// (1 MiB/s: 5 GiB get 30 s + 85 min).
	MinTransferRate int64
}

// Store keeps checkpoints and savepoints in a local directory. Its methods
// are safe for concurrent use; subtasks may write their state concurrently.
// One directory must be used by one Store at a time.
type Store struct {
	fs       vfs.FS
	dir      string
	retained int
	log      *slog.Logger
	// skipCorrupt is Options.SkipCorrupt.
	skipCorrupt bool

	// mu serialises ReserveID, Complete (with its retention), Discard and
	// Latest, so that ids are reserved one at a time and retention never
	// removes a directory Latest is validating; and guards owner.
	mu sync.Mutex
	// owner is set by Acquire: from then on ids and completions are made
	// only while this store is the directory's owner.
	owner *owner
	// skipped counts the completed checkpoints Latest skipped as corrupt
	// under Options.SkipCorrupt.
	skipped atomic.Int64
}

// Open returns a Store for dir, creating dir (durably) if needed.
func Open(dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, errors.New("checkpoint/store: Open: dir is empty: pass the directory that holds the job's checkpoints")
	}
	if opts.Retained < 0 {
		return nil, fmt.Errorf("checkpoint/store: Options.Retained = %d: must be at least 1 (or 0 for the default, %d)",
			opts.Retained, DefaultRetained)
	}
	s := &Store{fs: opts.FS, dir: filepath.Clean(dir), retained: opts.Retained, log: opts.Logger, skipCorrupt: opts.SkipCorrupt}
	if s.fs == nil {
		s.fs = vfs.Default
	}
	if s.retained == 0 {
		s.retained = DefaultRetained
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if err := s.mkdirAllDurable(filepath.Join(s.dir, savepointsDir)); err != nil {
		return nil, err
	}
	return s, nil
}

// mkdirAllDurable creates dir and its missing parents durably.
func (s *Store) mkdirAllDurable(dir string) error {
	if err := vfs.MkdirAllDurable(s.fs, dir, 0o755); err != nil {
		return ioErr("creating directory", dir, err)
	}
	return nil
}

// Location returns the store's directory.
func (s *Store) Location() string { return s.dir }

// Dir returns the directory of checkpoint or savepoint id. Kinds other than
// checkpoint.KindSavepoint map to the checkpoint directory.
func (s *Store) Dir(id checkpoint.ID, kind checkpoint.Kind) string {
	if kind == checkpoint.KindSavepoint {
		return filepath.Join(s.dir, savepointsDir, dirName(id, kind))
	}
	return filepath.Join(s.dir, dirName(id, kind))
}

// ReserveID returns a new checkpoint id, higher than every id reserved
// before in this directory (recorded in its _ids file) and than every
// checkpoint or savepoint directory in it, and durably records it before
// returning, so that ids never repeat across restarts and crashes even when
// checkpoint directories are deleted. Checkpoints and savepoints share one
// id sequence.
func (s *Store) ReserveID() (checkpoint.ID, error) {
	return s.reserveAbove(0)
}

// ReserveAbove is ReserveID with a floor: the id returned is also higher
// than floor. A job restored from a checkpoint of another directory calls it
// with that checkpoint's id, because sinks recognise committed transactions
// by checkpoint id and must never see an id again.
func (s *Store) ReserveAbove(floor checkpoint.ID) (checkpoint.ID, error) {
	return s.reserveAbove(floor)
}

func (s *Store) reserveAbove(floor checkpoint.ID) (id checkpoint.ID, err error) {
	err = s.whileOwner(func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		id, err = s.reserveLocked(floor)
		return err
	})
	return id, err
}

func (s *Store) reserveLocked(floor checkpoint.ID) (checkpoint.ID, error) {
	last, completed, err := s.readIDs()
	last = max(last, floor)
	if err != nil {
		return 0, err
	}
	for _, kind := range []checkpoint.Kind{checkpoint.KindCheckpoint, checkpoint.KindSavepoint} {
		ids, err := s.list(kind)
		if err != nil {
			return 0, err
		}
		if len(ids) > 0 {
			last = max(last, ids[len(ids)-1])
		}
	}
	if last == math.MaxUint64 {
		return 0, fmt.Errorf("checkpoint/store: checkpoint ids exhausted in %s", s.dir)
	}
	id := last + 1
	if err := s.writeIDs(id, completed); err != nil {
		return 0, err
	}
	return id, nil
}

// writeIDs replaces _ids durably.
func (s *Store) writeIDs(reserved, completed checkpoint.ID) error {
	return s.writeAtomic(s.dir, idsFile, format.EncodeIDs(reserved, completed))
}

// recordCompleted raises the completed id in _ids after id completed, so
// that a completed checkpoint whose metadata is later lost is told from one
// that never completed. The checkpoint is complete already: a failure is
// logged, not returned. s.mu must be held.
func (s *Store) recordCompleted(id checkpoint.ID) {
	reserved, completed, err := s.readIDs()
	if err == nil && completed < id {
		err = s.writeIDs(max(reserved, id), id)
	}
	if err != nil {
		s.log.Warn("checkpoint/store: cannot record the completed checkpoint in "+idsFile+"; a later loss of its metadata would be taken for a crash", "id", id, "err", err)
	}
}

// readIDs returns the highest id reserved and the highest id that
// completed, recorded in _ids; 0, 0 if there is none. Files written before
// the completed id was recorded hold only the first (completed is 0).
func (s *Store) readIDs() (reserved, completed checkpoint.ID, err error) {
	path := filepath.Join(s.dir, idsFile)
	b, err := s.readFile(path, -1)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	if err != nil {
		return 0, 0, err
	}
	reserved, completed, err = format.DecodeIDs(path, b)
	if err != nil {
		return 0, 0, fmt.Errorf("%w (ids must never repeat: restore the file from a backup, or replace it with one holding an id above every id ever used)", err)
	}
	return reserved, completed, nil
}

// list returns the ids of the directories of the given kind, increasing.
func (s *Store) list(kind checkpoint.Kind) ([]checkpoint.ID, error) {
	dir := filepath.Dir(s.Dir(0, kind))
	names, err := s.fs.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, ioErr("listing", dir, err)
	}
	var ids []checkpoint.ID
	for _, name := range names {
		if id, ok := parseDirName(name, dirPrefix(kind)); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}

// WriteState writes and syncs the state file of one subtask of an operator
// for checkpoint or savepoint id, creating its directory if needed, and
// returns a handle with Subtask, File, Size and CRC32C set; the caller fills
// in the key group range. The file is not durable until Complete syncs its
// directory. Writing the same subtask twice replaces the file.
func (s *Store) WriteState(id checkpoint.ID, kind checkpoint.Kind, operator string, subtask int, snap checkpoint.SubtaskSnapshot) (checkpoint.StateHandle, error) {
	name, data, err := encodeStateFile(kind, operator, subtask, snap)
	if err != nil {
		return checkpoint.StateHandle{}, err
	}
	dir := s.Dir(id, kind)
	if err := s.fs.MkdirAll(dir, 0o755); err != nil {
		return checkpoint.StateHandle{}, ioErr("creating directory", dir, err)
	}
	if err := s.writeFile(filepath.Join(dir, name), data); err != nil {
		return checkpoint.StateHandle{}, err
	}
	return stateHandle(subtask, name, data, snap), nil
}

// Complete makes a checkpoint or savepoint complete by durably writing its
// metadata, and returns its directory. The state files m names must have
// been written by WriteState. FormatVersion 0 is set to FormatVersion.
//
// The order of the steps is what makes a checkpoint all-or-nothing: the
// directory is synced (state file names durable), and its parent (the
// directory itself durable); the metadata is written to a temporary file and
// synced, renamed to _metadata, and the directory synced again. Only the
// rename makes the checkpoint visible, and only after everything it refers
// to is durable.
//
// If Complete returns an error, the checkpoint may or may not have become
// complete (a failed sync says nothing about what reached the disk): the
// caller must not treat it as aborted (and abort the transactions it
// covers) but fail over and restore from Latest, which decides.
//
// After a checkpoint (not a savepoint) completes, older checkpoints beyond
// Options.Retained, and directories of checkpoints with lower ids that never
// completed, are removed. Failures to remove them are logged, not returned:
// the checkpoint is complete regardless.
func (s *Store) Complete(m checkpoint.Metadata) (path string, err error) {
	data, err := encodeMetadataFile(&m)
	if err != nil {
		return "", err
	}
	dir := s.Dir(m.ID, m.Kind)
	for _, op := range m.Operators {
		for _, h := range op.Subtasks {
			if !validStateFile(h.File) {
				return "", fmt.Errorf("checkpoint/store: Complete: operator %q subtask %d: state file name %q is not a file written by WriteState",
					op.Name, h.Subtask, h.File)
			}
			fi, err := s.fs.Stat(filepath.Join(dir, h.File))
			if err != nil {
				return "", ioErr("checking state file", filepath.Join(dir, h.File), err)
			}
			if fi.Size() != h.Size {
				return "", fmt.Errorf("checkpoint/store: Complete: state file %s is %d bytes but its handle says %d",
					filepath.Join(dir, h.File), fi.Size(), h.Size)
			}
		}
	}
	err = s.whileOwner(func() error {
		s.mu.Lock()
		defer s.mu.Unlock()
		// Under s.mu, so that no sweep deletes a shared file between this
		// check and the metadata that makes it needed.
		if err := s.checkSharedPresent(dir, &m); err != nil {
			return fmt.Errorf("checkpoint/store: Complete: %w", err)
		}
		if len(sharedOf(&m)) > 0 {
			if err := s.syncDir(filepath.Join(s.dir, sharedDir)); err != nil {
				return err
			}
		}
		if err := s.fs.MkdirAll(dir, 0o755); err != nil {
			return ioErr("creating directory", dir, err)
		}
		if err := s.syncDir(dir); err != nil {
			return err
		}
		if err := s.syncDir(filepath.Dir(dir)); err != nil {
			return err
		}
		if err := s.writeAtomic(dir, metadataFile, data); err != nil {
			return err
		}
		s.recordCompleted(m.ID)
		if m.Kind == checkpoint.KindCheckpoint {
			s.retain(m.ID)
			s.sweepShared(m.ID)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return dir, nil
}

// retain removes the completed checkpoints beyond the s.retained newest and
// the incomplete ones older than the checkpoint that just completed. s.mu
// must be held.
func (s *Store) retain(completed checkpoint.ID) {
	ids, err := s.list(checkpoint.KindCheckpoint)
	if err != nil {
		s.log.Warn("checkpoint/store: cannot apply checkpoint retention", "dir", s.dir, "err", err)
		return
	}
	kept := 0
	for _, id := range slices.Backward(ids) {
		dir := s.Dir(id, checkpoint.KindCheckpoint)
		_, err := s.fs.Stat(filepath.Join(dir, metadataFile))
		switch {
		case err == nil:
			kept++
			if kept <= s.retained {
				continue
			}
		case !errors.Is(err, fs.ErrNotExist):
			s.log.Warn("checkpoint/store: cannot apply checkpoint retention", "dir", dir, "err", err)
			continue
		case id >= completed:
			continue // may still be in progress
		}
		if err := s.remove(dir); err != nil {
			s.log.Warn("checkpoint/store: cannot remove old checkpoint", "dir", dir, "err", err)
		}
	}
}

// remove removes a checkpoint directory, its metadata first (durably), so
// that a crash half-way leaves an incomplete checkpoint rather than a
// complete-looking one with state files missing.
func (s *Store) remove(dir string) error {
	err := s.fs.Remove(filepath.Join(dir, metadataFile))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return ioErr("removing", filepath.Join(dir, metadataFile), err)
	}
	if err == nil {
		if err := s.syncDir(dir); err != nil {
			return err
		}
	}
	if err := s.fs.RemoveAll(dir); err != nil {
		return ioErr("removing", dir, err)
	}
	return nil
}

// Discard removes the directory of a checkpoint or savepoint that was
// aborted. It refuses to remove a complete one.
func (s *Store) Discard(id checkpoint.ID, kind checkpoint.Kind) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := s.Dir(id, kind)
	meta := filepath.Join(dir, metadataFile)
	if _, err := s.fs.Stat(meta); err == nil {
		return fmt.Errorf("checkpoint/store: Discard: %s %d is complete (%s exists): refusing to remove it", kind, id, meta)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return ioErr("checking", meta, err)
	}
	if err := s.fs.RemoveAll(dir); err != nil {
		return ioErr("removing", dir, err)
	}
	return nil
}

func checkKind(kind checkpoint.Kind) error {
	if kind != checkpoint.KindCheckpoint && kind != checkpoint.KindSavepoint {
		return fmt.Errorf("checkpoint/store: kind %q: must be %q or %q", kind, checkpoint.KindCheckpoint, checkpoint.KindSavepoint)
	}
	return nil
}

// writeAtomic replaces dir/name by data durably: it writes and syncs
// dir/name.tmp, renames it to dir/name and syncs dir.
func (s *Store) writeAtomic(dir, name string, data []byte) error {
	tmp, path := filepath.Join(dir, name+tmpSuffix), filepath.Join(dir, name)
	if err := s.writeFile(tmp, data); err != nil {
		return err
	}
	if err := s.fs.Rename(tmp, path); err != nil {
		return ioErr("renaming to "+path, tmp, err)
	}
	return s.syncDir(dir)
}

// writeFile creates path, writes data to it and syncs it.
func (s *Store) writeFile(path string, data []byte) error {
	return s.writeFrom(path, bytes.NewReader(data))
}

// writeFrom writes what r yields to a new file at path, durably.
func (s *Store) writeFrom(path string, r io.Reader) error {
	f, err := s.fs.Create(path)
	if err != nil {
		return ioErr("creating", path, err)
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return ioErr("writing", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return ioErr("syncing", path, err)
	}
	if err := f.Close(); err != nil {
		return ioErr("closing", path, err)
	}
	return nil
}

func (s *Store) syncDir(dir string) error {
	if err := s.fs.SyncDir(dir); err != nil {
		return ioErr("syncing directory", dir, err)
	}
	return nil
}

// readFile returns the contents of path. If want >= 0 the file must be want
// bytes long. A missing, wrong-sized or shrinking file is corrupt, except
// that a missing file is also fs.ErrNotExist.
func (s *Store) readFile(path string, want int64) ([]byte, error) {
	f, err := s.openSized(path, want)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, f.size)
	if _, err := io.ReadFull(f, b); errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return nil, format.Corruptf(path, "file shrank to less than %d bytes while being read", f.size)
	} else if err != nil {
		return nil, ioErr("reading", path, err)
	}
	return b, nil
}

// sizedFile is a file opened for reading with its size when opened.
type sizedFile struct {
	vfs.File
	size int64
}

// openSized opens path for reading. If want >= 0 the file must be want
// bytes long; else it must be no longer than a metadata file may be. A
// missing or wrong-sized file is corrupt, except that a missing file is
// also fs.ErrNotExist.
func (s *Store) openSized(path string, want int64) (sizedFile, error) {
	fi, err := s.fs.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return sizedFile{}, &format.CorruptFileError{Path: path, Problem: "file is missing", Cause: err}
	}
	if err != nil {
		return sizedFile{}, ioErr("reading", path, err)
	}
	size := fi.Size()
	switch {
	case want >= 0 && size != want:
		return sizedFile{}, format.Corruptf(path, "file is %d bytes, the metadata records %d (truncated or overwritten?)", size, want)
	case want < 0 && size > maxMetadataSize:
		return sizedFile{}, format.Corruptf(path, "file is %d bytes, more than the %d a metadata file may have", size, maxMetadataSize)
	}
	f, err := s.fs.Open(path)
	if err != nil {
		return sizedFile{}, ioErr("opening", path, err)
	}
	return sizedFile{File: f, size: size}, nil
}

// ioErr wraps an I/O error with what the store was doing and the file,
// unless err already names the file.
func ioErr(doing, path string, err error) error {
	if pe, ok := errors.AsType[*fs.PathError](err); ok && pe.Path == path {
		return fmt.Errorf("checkpoint/store: %s: %w", doing, err)
	}
	return fmt.Errorf("checkpoint/store: %s %s: %w", doing, path, err)
}
