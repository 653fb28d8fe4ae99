// Package vfs is the small filesystem interface through which the checkpoint
// store and the file sink (connectors/file) do all of their file I/O, in
// the spirit of Pebble's vfs package.
//
// Three implementations are provided:
//
//   - [Default] uses the operating system.
//   - [NewCrashableMem] returns an in-memory filesystem that keeps only what
//     was made durable (file data by [File.Sync], directory entries by
//     [FS.SyncDir]); [MemFS.Crash] simulates a power loss, so crash recovery
//     can be tested without crashing anything.
//   - [WithErrors] wraps another FS and fails the operations a callback
//     chooses, to test write failures such as a full or read-only disk.
package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// File is an open file: readable if it came from [FS.Open], writable if it
// came from [FS.Create], either or both as [FS.OpenFile]'s flag says.
type File interface {
	io.Reader
	io.Writer
	io.Closer
	// Sync makes the file's contents durable.
	Sync() error
}

// FS is a filesystem. Names are slash- or OS-separated paths as produced by
// path/filepath. Errors about a named file are *fs.PathError values, so
// errors.Is(err, fs.ErrNotExist) works on every implementation.
type FS interface {
	// Create creates the named file for writing, truncating it if it exists.
	Create(name string) (File, error)
	// Open opens the named file for reading.
	Open(name string) (File, error)
	// OpenFile opens the named file as os.OpenFile does, creating it with
	// perm (before the umask) if flag asks for that and it is missing.
	// flag is os.O_RDONLY, os.O_WRONLY or os.O_RDWR, or'ed with any of
	// os.O_CREATE, os.O_EXCL (with O_CREATE only: fail with an error
	// wrapping fs.ErrExist if the file exists) and os.O_TRUNC (with write
	// access only). Every implementation rejects other flags with an error
	// wrapping fs.ErrInvalid, so that code tested on one behaves alike on
	// the others.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	// Rename atomically replaces newname by oldname.
	Rename(oldname, newname string) error
	// Remove removes the named file or empty directory.
	Remove(name string) error
	// RemoveAll removes name and everything below it. It returns nil if name
	// does not exist.
	RemoveAll(name string) error
	// MkdirAll creates dir and any missing parents.
	MkdirAll(dir string, perm os.FileMode) error
	// ReadDir returns the names of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	// Stat describes the named file.
	Stat(name string) (os.FileInfo, error)
	// Lstat describes the named file; a symbolic link is described itself,
	// not followed.
	Lstat(name string) (os.FileInfo, error)
	// SyncDir makes the creations, renames and removals of entries in dir
	// durable. A file written and synced is not durable until the directory
	// holding its name is synced as well.
	SyncDir(dir string) error
	// TryLock takes an exclusive advisory lock on the named file, creating
	// it if needed, without waiting: if another holder (another process, or
	// another TryLock in this one) has it, it fails with an error wrapping
	// [ErrLocked]. Closing the returned value releases the lock; so does
	// the death of the process.
	TryLock(name string) (io.Closer, error)
	// Lock takes the lock TryLock takes, but waits as long as another
	// holder has it. The wait cannot be cancelled.
	Lock(name string) (io.Closer, error)
}

// ErrLocked is wrapped by [FS.TryLock] errors when the lock is held.
var ErrLocked = errors.New("vfs: locked by another holder")

// Default is the operating system's filesystem.
var Default FS = osFS{}

type osFS struct{}

func (osFS) Create(name string) (File, error) { return os.Create(name) }

func (osFS) Open(name string) (File, error) { return os.Open(name) }

func (osFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := checkOpenFlag(name, flag); err != nil {
		return nil, err
	}
	return os.OpenFile(name, flag, perm)
}

// checkOpenFlag returns an error wrapping fs.ErrInvalid if flag is not one
// [FS.OpenFile] accepts.
func checkOpenFlag(name string, flag int) error {
	access := flag & (os.O_WRONLY | os.O_RDWR)
	valid := flag&^(os.O_WRONLY|os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_TRUNC) == 0 &&
		access != os.O_WRONLY|os.O_RDWR &&
		(flag&os.O_EXCL == 0 || flag&os.O_CREATE != 0) &&
		(flag&os.O_TRUNC == 0 || access != os.O_RDONLY)
	if !valid {
		return &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w: open flags %#x: use O_RDONLY, O_WRONLY or O_RDWR with O_CREATE, O_EXCL (with O_CREATE) and O_TRUNC (with write access) only", fs.ErrInvalid, flag)}
	}
	return nil
}

func (osFS) Rename(oldname, newname string) error { return os.Rename(oldname, newname) }

// Linker is a filesystem that can give a file of the operating system's
// filesystem a second name: [Default] does. The in-memory and the
// error-injecting filesystems do not, so what they test always copies.
type Linker interface {
	// Link makes newname, a name of this filesystem, a hard link to the
	// operating system's file oldname. It fails when they are on
	// different filesystems or the filesystem has no hard links.
	Link(oldname, newname string) error
}

func (osFS) Link(oldname, newname string) error { return os.Link(oldname, newname) }

func (osFS) Remove(name string) error { return os.Remove(name) }

func (osFS) RemoveAll(name string) error { return os.RemoveAll(name) }

func (osFS) MkdirAll(dir string, perm os.FileMode) error { return os.MkdirAll(dir, perm) }

func (osFS) Stat(name string) (os.FileInfo, error) { return os.Stat(name) }

func (osFS) Lstat(name string) (os.FileInfo, error) { return os.Lstat(name) }

func (osFS) ReadDir(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		return nil, err
	}
	names := make([]string, len(entries))
	for i, e := range entries {
		names[i] = e.Name()
	}
	return names, nil
}

func (osFS) SyncDir(dir string) error {
	f, err := os.Open(filepath.Clean(dir))
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// MkdirAllDurable creates dir and its missing parents on fsys and syncs the
// parent of every directory it created, so that they survive a crash (a
// directory entry is durable only once its parent is synced).
func MkdirAllDurable(fsys FS, dir string, perm os.FileMode) error {
	var created []string
	for d := dir; ; d = filepath.Dir(d) {
		_, err := fsys.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	if err := fsys.MkdirAll(dir, perm); err != nil {
		return err
	}
	for _, d := range created {
		if err := fsys.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}
