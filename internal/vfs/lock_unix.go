//go:build unix

package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// TryLock takes a flock(2) lock on name. Locks belong to the open file, so
// two TryLocks in one process exclude each other as two processes do.
func (osFS) TryLock(name string) (io.Closer, error) {
	return flock(name, syscall.LOCK_EX|syscall.LOCK_NB)
}

// Lock takes a flock(2) lock on name like TryLock, waiting for it.
func (osFS) Lock(name string) (io.Closer, error) {
	return flock(name, syscall.LOCK_EX)
}

// flock opens name (read-write, created with mode 0644 if missing) and
// takes flock(2) on it with how, retrying when a signal interrupts the
// wait. A holder may remove its lock file before it unlocks it; a lock
// taken on a file that is no longer at name excludes no one, so flock
// then starts again on the file now at name.
func flock(name string, how int) (*os.File, error) {
	for {
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, err
		}
		for {
			err = syscall.Flock(int(f.Fd()), how)
			if !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		if err != nil {
			f.Close()
			if errors.Is(err, syscall.EWOULDBLOCK) {
				err = ErrLocked
			}
			return nil, &fs.PathError{Op: "flock", Path: name, Err: err}
		}
		current, err := stillAt(f, name)
		if err == nil && current {
			return f, nil
		}
		f.Close()
		if err != nil {
			return nil, err
		}
	}
}

// stillAt reports whether the open file f is the file at name.
func stillAt(f *os.File, name string) (bool, error) {
	held, err := f.Stat()
	if err != nil {
		return false, err
	}
	now, err := os.Stat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return os.SameFile(held, now), nil
}
