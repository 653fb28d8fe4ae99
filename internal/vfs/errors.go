package vfs

import (
	"io"
	"io/fs"
	"os"
)

// Operation names passed to the callback of [WithErrors].
const (
	OpCreate    = "create"
	OpOpen      = "open"
	OpOpenFile  = "openfile"
	OpRename    = "rename"
	OpRemove    = "remove"
	OpRemoveAll = "removeall"
	OpMkdirAll  = "mkdirall"
	OpReadDir   = "readdir"
	OpStat      = "stat"
	OpLstat     = "lstat"
	OpSyncDir   = "syncdir"
	OpRead      = "read"
	OpWrite     = "write"
	OpSync      = "sync"
	OpClose     = "close"
	OpTryLock   = "trylock"
	OpLock      = "lock"
)

// WithErrors returns an FS that calls inject before every operation on inner
// and on the files it opens, with the operation's name (one of the Op constants)
// and the file's name (for Rename, the old name; for file operations, the
// name the file was created or opened with). If inject returns an error the
// operation is not performed and fails with that error, wrapped in an
// *fs.PathError naming the operation and the file. inject may be called
// concurrently.
func WithErrors(inner FS, inject func(op, name string) error) FS {
	return &errorFS{fs: inner, inject: inject}
}

type errorFS struct {
	fs     FS
	inject func(op, name string) error
}

func (e *errorFS) check(op, name string) error {
	if err := e.inject(op, name); err != nil {
		return &fs.PathError{Op: op, Path: name, Err: err}
	}
	return nil
}

func (e *errorFS) Create(name string) (File, error) {
	return e.open(OpCreate, name, func() (File, error) { return e.fs.Create(name) })
}

func (e *errorFS) Open(name string) (File, error) {
	return e.open(OpOpen, name, func() (File, error) { return e.fs.Open(name) })
}

func (e *errorFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	return e.open(OpOpenFile, name, func() (File, error) { return e.fs.OpenFile(name, flag, perm) })
}

// open checks op on name, then opens the file with open and wraps it, so
// that its operations are checked too.
func (e *errorFS) open(op, name string, open func() (File, error)) (File, error) {
	if err := e.check(op, name); err != nil {
		return nil, err
	}
	f, err := open()
	if err != nil {
		return nil, err
	}
	return &errorFile{e: e, name: name, f: f}, nil
}

func (e *errorFS) Rename(oldname, newname string) error {
	if err := e.check(OpRename, oldname); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

func (e *errorFS) Remove(name string) error {
	if err := e.check(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

func (e *errorFS) RemoveAll(name string) error {
	if err := e.check(OpRemoveAll, name); err != nil {
		return err
	}
	return e.fs.RemoveAll(name)
}

func (e *errorFS) MkdirAll(dir string, perm os.FileMode) error {
	if err := e.check(OpMkdirAll, dir); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir, perm)
}

func (e *errorFS) ReadDir(dir string) ([]string, error) {
	if err := e.check(OpReadDir, dir); err != nil {
		return nil, err
	}
	return e.fs.ReadDir(dir)
}

func (e *errorFS) Stat(name string) (os.FileInfo, error) {
	if err := e.check(OpStat, name); err != nil {
		return nil, err
	}
	return e.fs.Stat(name)
}

func (e *errorFS) Lstat(name string) (os.FileInfo, error) {
	if err := e.check(OpLstat, name); err != nil {
		return nil, err
	}
	return e.fs.Lstat(name)
}

func (e *errorFS) SyncDir(dir string) error {
	if err := e.check(OpSyncDir, dir); err != nil {
		return err
	}
	return e.fs.SyncDir(dir)
}

type errorFile struct {
	e    *errorFS
	name string
	f    File
}

func (f *errorFile) Read(p []byte) (int, error) {
	if err := f.e.check(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.f.Read(p)
}

func (f *errorFile) Write(p []byte) (int, error) {
	if err := f.e.check(OpWrite, f.name); err != nil {
		return 0, err
	}
	return f.f.Write(p)
}

func (f *errorFile) Sync() error {
	if err := f.e.check(OpSync, f.name); err != nil {
		return err
	}
	return f.f.Sync()
}

// Close always closes the underlying file, so an injected Close error does
// not leak it.
func (f *errorFile) Close() error {
	err := f.e.check(OpClose, f.name)
	if cerr := f.f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (e *errorFS) TryLock(name string) (io.Closer, error) {
	if err := e.check(OpTryLock, name); err != nil {
		return nil, err
	}
	return e.fs.TryLock(name)
}

func (e *errorFS) Lock(name string) (io.Closer, error) {
	if err := e.check(OpLock, name); err != nil {
		return nil, err
	}
	return e.fs.Lock(name)
}
