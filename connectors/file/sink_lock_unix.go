//go:build unix

package file

import (
	"errors"
	"os"
	"syscall"
)

// lockFile takes an exclusive flock(2) lock on path, creating the file if
// missing, and waits as long as another holder has it. Locks belong to the
// open file, so two lockFiles in one process exclude each other as two
// processes do. Closing the returned file releases the lock; so does the
// holder's death.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, errors.Join(&os.PathError{Op: "flock", Path: path, Err: err}, f.Close())
	}
	return f, nil
}
