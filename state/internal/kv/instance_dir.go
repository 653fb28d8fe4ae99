package kv

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/exactlyonce/exactly/internal/vfs"
)

// Every database instance has a directory of its own, named after the
// subtask's base path and the instance id (base.<instance>), and a lock
// file next to it (base.<instance>.lock) on which it holds flock(2) for as
// long as it is open. Two processes that run the same job with the same
// state directory — a zombie that resumed after its successor took over,
// a second instance started by mistake — so never write, wipe or remove
// each other's database: each removes only its own directory, and the
// directories of instances whose lock no process holds (left by a
// process that was killed).
const lockSuffix = ".lock"

// instanceIDLen is the length of an instance id: 16 hex digits.
const instanceIDLen = 16

// instanceDir returns the directory of instance of the subtask at base.
func instanceDir(base, instance string) string { return base + "." + instance }

// lockInstance creates base's parent directory if missing and takes the
// lock of instance, which no other holder can have (ids are random).
func lockInstance(base, instance string) (io.Closer, error) {
	if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
		return nil, fmt.Errorf("kv: creating %s: %w", filepath.Dir(base), err)
	}
	lock, err := vfs.Default.TryLock(instanceDir(base, instance) + lockSuffix)
	if err != nil {
		return nil, fmt.Errorf("kv: locking the database directory: %w", err)
	}
	return lock, nil
}

// unlockInstance removes the lock file of the instance in dir and releases
// the lock; the instance's directory must be gone already.
func unlockInstance(dir string, lock io.Closer) error {
	err := os.Remove(dir + lockSuffix)
	if errors.Is(err, os.ErrNotExist) {
		err = nil
	}
	return errors.Join(err, lock.Close())
}

// removeAbandoned removes the directories, scratch directories and lock
// files of the instances of base other than self whose lock no process
// holds.
func removeAbandoned(base, self string) error {
	parent, prefix := filepath.Dir(base), filepath.Base(base)+"."
	entries, err := os.ReadDir(parent)
	if err != nil {
		return fmt.Errorf("kv: listing %s: %w", parent, err)
	}
	instances := make(map[string]bool)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || len(rest) < instanceIDLen || !isInstanceID(rest[:instanceIDLen]) {
			continue
		}
		if len(rest) > instanceIDLen && rest[instanceIDLen] != '.' {
			continue
		}
		if id := rest[:instanceIDLen]; id != self {
			instances[id] = true
		}
	}
	var errs []error
	for id := range instances {
		errs = append(errs, removeIfAbandoned(instanceDir(base, id)))
	}
	return errors.Join(errs...)
}

// removeIfAbandoned removes the instance in dir, with its scratch
// directories and lock file, unless a process holds its lock.
func removeIfAbandoned(dir string) error {
	lock, err := vfs.Default.TryLock(dir + lockSuffix)
	if errors.Is(err, vfs.ErrLocked) {
		return nil // open in a live process
	}
	if err != nil {
		return fmt.Errorf("kv: locking an abandoned database directory: %w", err)
	}
	if err := errors.Join(os.RemoveAll(dir), removeScratch(dir)); err != nil {
		return errors.Join(fmt.Errorf("kv: removing the abandoned database %s: %w", dir, err), lock.Close())
	}
	return unlockInstance(dir, lock)
}

// isInstanceID reports whether s is made of lower-case hex digits.
func isInstanceID(s string) bool {
	for _, c := range s {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return s != ""
}
