package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/vfs"
)

// WriteShared writes data as the shared file <dir>/shared/<id>-<key> and
// syncs it; its name becomes durable when Complete syncs the shared
// directory. Writing the same name again replaces the file atomically.
func (s *Store) WriteShared(id checkpoint.ID, key string, r io.ReadSeeker, size int64) (checkpoint.SharedFile, error) {
	name, err := sharedName(id, key)
	if err != nil {
		return checkpoint.SharedFile{}, err
	}
	dir := filepath.Join(s.dir, sharedDir)
	if err := s.mkdirAllDurable(dir); err != nil {
		return checkpoint.SharedFile{}, err
	}
	tmp, path := filepath.Join(dir, name+tmpSuffix), filepath.Join(dir, name)
	src := newChecksumReader(r)
	linked, err := s.linkFrom(tmp, r, src)
	if err != nil {
		return checkpoint.SharedFile{}, err
	}
	if !linked {
		if err := s.writeFrom(tmp, src); err != nil {
			return checkpoint.SharedFile{}, err
		}
	}
	f, err := src.sharedFile(name, size)
	if err != nil {
		return f, errors.Join(err, s.fs.Remove(tmp))
	}
	if err := s.fs.Rename(tmp, path); err != nil {
		return checkpoint.SharedFile{}, ioErr("renaming to "+path, tmp, err)
	}
	return f, nil
}

// linkFrom makes tmp a hard link to r's file when r is a file of the
// operating system on the store's filesystem, and reads r through src for
// its checksum: a checkpoint in a local directory then shares the
// database files it takes (which never change once written) instead of
// writing them again. It reports false, having read nothing, when it
// cannot link: the caller copies.
func (s *Store) linkFrom(tmp string, r io.ReadSeeker, src *checksumReader) (bool, error) {
	l, canLink := s.fs.(vfs.Linker)
	file, isFile := r.(*os.File)
	if !canLink || !isFile {
		return false, nil
	}
	if err := l.Link(file.Name(), tmp); err != nil {
		return false, nil // another filesystem, no hard links, or the name is gone
	}
	if err := s.checkLinked(tmp, file, src); err != nil {
		return false, errors.Join(err, s.fs.Remove(tmp))
	}
	return true, nil
}

// checkLinked checks that tmp, just linked, is file's, reads file through
// src and makes tmp durable.
func (s *Store) checkLinked(tmp string, file *os.File, src *checksumReader) error {
	fi, err := file.Stat()
	if err != nil {
		return ioErr("reading", file.Name(), err)
	}
	ti, err := s.fs.Stat(tmp)
	if err != nil {
		return ioErr("reading", tmp, err)
	}
	if !os.SameFile(fi, ti) {
		return fmt.Errorf("checkpoint/store: %s, linked to %s, is another file than the one open under that name", tmp, file.Name())
	}
	buf := make([]byte, linkedReadBytes)
	for {
		_, err := src.Read(buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return ioErr("reading", file.Name(), err)
		}
	}
	t, err := s.fs.Open(tmp)
	if err != nil {
		return ioErr("opening", tmp, err)
	}
	if err := t.Sync(); err != nil {
		t.Close()
		return ioErr("syncing", tmp, err)
	}
	return t.Close()
}

// linkedReadBytes is the buffer with which a linked file is read for its
// checksum.
const linkedReadBytes = 256 << 10

// ReadSharedAt streams the shared file f of the checkpoint in directory
// dir (in <dir>/../shared) to w and verifies it against f; on error w may
// hold part of it.
func (s *Store) ReadSharedAt(dir string, f checkpoint.SharedFile, w io.Writer) error {
	path, err := s.sharedPath(dir, f)
	if err != nil {
		return err
	}
	file, err := s.openSized(path, f.Size)
	if err != nil {
		return err
	}
	defer file.Close()
	return copyShared(path, f, w, func(w io.Writer) (int64, error) {
		n, err := io.Copy(w, file)
		if err != nil {
			return n, ioErr("reading", path, err)
		}
		return n, nil
	})
}

// sharedPath returns the path of the shared file f of the checkpoint in
// directory dir.
func (s *Store) sharedPath(dir string, f checkpoint.SharedFile) (string, error) {
	if !format.ValidSharedName(f.Name) {
		return "", format.Corruptf(filepath.Join(dir, metadataFile), "shared file name %q is not valid", f.Name)
	}
	return filepath.Join(filepath.Dir(filepath.Clean(dir)), sharedDir, f.Name), nil
}

// checkSharedPresent checks that every shared file m lists exists in the
// shared directory of the checkpoint in dir with its recorded size; a
// missing or resized one is corrupt.
func (s *Store) checkSharedPresent(dir string, m *checkpoint.Metadata) error {
	for _, f := range sharedOf(m) {
		path, err := s.sharedPath(dir, f)
		if err != nil {
			return err
		}
		fi, err := s.fs.Stat(path)
		if errors.Is(err, fs.ErrNotExist) {
			return &format.CorruptFileError{Path: path, Problem: fmt.Sprintf("shared file is missing, but checkpoint %d refers to it", m.ID), Cause: err}
		}
		if err != nil {
			return ioErr("checking shared file", path, err)
		}
		if fi.Size() != f.Size {
			return format.Corruptf(path, "shared file is %d bytes, checkpoint %d records %d", fi.Size(), m.ID, f.Size)
		}
	}
	return nil
}

// sweepShared deletes the shared files that no retained checkpoint needs
// and that were uploaded for ids below completed. It reads the metadata of
// every retained checkpoint; if one cannot be read it deletes nothing
// (the next completion tries again). s.mu must be held.
func (s *Store) sweepShared(completed checkpoint.ID) {
	dir := filepath.Join(s.dir, sharedDir)
	names, err := s.fs.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(names) == 0 {
		return
	}
	if err != nil {
		s.log.Warn("checkpoint/store: cannot sweep shared files", "dir", dir, "err", err)
		return
	}
	needed, err := s.neededShared()
	if err != nil {
		s.log.Warn("checkpoint/store: cannot sweep shared files", "dir", dir, "err", err)
		return
	}
	for _, name := range names {
		if !unneededShared(name, needed, completed) {
			continue
		}
		if err := s.fs.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("checkpoint/store: cannot remove an unneeded shared file", "file", filepath.Join(dir, name), "err", err)
		}
	}
}

// neededShared returns the names of the shared files the checkpoints with
// metadata need (savepoints need none).
func (s *Store) neededShared() (map[string]bool, error) {
	ids, err := s.list(checkpoint.KindCheckpoint)
	if err != nil {
		return nil, err
	}
	needed := map[string]bool{}
	for _, id := range ids {
		path := filepath.Join(s.Dir(id, checkpoint.KindCheckpoint), metadataFile)
		b, err := s.readFile(path, -1)
		if errors.Is(err, fs.ErrNotExist) {
			continue // never completed
		}
		if err != nil {
			return nil, err
		}
		m, err := format.DecodeMetadata(path, b)
		if err != nil {
			return nil, err
		}
		for name := range sharedOf(&m) {
			needed[name] = true
		}
	}
	return needed, nil
}
