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
	f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			err = ErrLocked
		}
		return nil, &fs.PathError{Op: "flock", Path: name, Err: err}
	}
	return f, nil
}
