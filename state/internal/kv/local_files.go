package kv

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// localInfix names the directory, next to a database's, of LocalFiles.
const localInfix = ".files"

// LocalFiles keeps, next to a database's directory, copies of the files
// its incremental checkpoints uploaded (hard links where the file system
// allows), named by their names in the checkpoint storage. A restore on
// the same machine takes a file from here instead of downloading it, and
// only when its size and checksum are those the checkpoint records: the
// local copy provably holds what the checkpoint does, so a database that
// moved past the checkpoint (Kafka Streams' double count after a SIGKILL,
// KAFKA-20685) is never read. Open and Close leave the directory alone: it
// serves the next database in the same place.
type LocalFiles struct{ dir string }

// NewLocalFiles returns the local files of the database in dbDir.
func NewLocalFiles(dbDir string) LocalFiles { return LocalFiles{dir: dbDir + localInfix} }

// Dir returns the directory of the local files.
func (l LocalFiles) Dir() string { return l.dir }

// Keep keeps a copy of the file at src under name.
func (l LocalFiles) Keep(name, src string) error {
	if err := os.MkdirAll(l.dir, 0o755); err != nil {
		return fmt.Errorf("kv: creating %s: %w", l.dir, err)
	}
	dst := filepath.Join(l.dir, name)
	if _, err := os.Lstat(dst); err == nil {
		return nil // kept already: names are never reused for other contents
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	return copyFile(src, dst)
}

// Fetch puts the file kept under name at dst when it has the given size
// and CRC-32C, and reports whether it did. A kept file that differs is
// removed.
func (l LocalFiles) Fetch(name string, size int64, crc uint32, dst string) (bool, error) {
	path := filepath.Join(l.dir, name)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("kv: opening the local copy %s: %w", path, err)
	}
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	n, err := io.Copy(h, f)
	f.Close()
	if err != nil {
		return false, fmt.Errorf("kv: reading the local copy %s: %w", path, err)
	}
	if n != size || h.Sum32() != crc {
		return false, os.Remove(path)
	}
	if err := os.Link(path, dst); err == nil {
		return true, nil
	}
	err = copyFile(path, dst)
	if errors.Is(err, fs.ErrNotExist) {
		// Another process's Retain removed it since: download it instead.
		return false, nil
	}
	return err == nil, err
}

// Retain removes the kept files that keep says no to.
func (l LocalFiles) Retain(keep func(name string) bool) error {
	entries, err := os.ReadDir(l.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kv: listing %s: %w", l.dir, err)
	}
	var errs []error
	for _, e := range entries {
		if !keep(e.Name()) {
			errs = append(errs, os.Remove(filepath.Join(l.dir, e.Name())))
		}
	}
	return errors.Join(errs...)
}

// copyFile copies src to a new file dst, synced.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(dst)
	}
	return err
}
