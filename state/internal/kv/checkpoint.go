package kv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cockroachdb/pebble/v2"
)

// Scratch directories sit next to the database's directory, named after it
// with these infixes: checkpoints being uploaded, downloaded checkpoints
// being restored, and tables being written for IngestFrom. Close removes them, Open those of abandoned
// instances.
const (
	checkpointInfix = ".checkpoint-"
	downloadInfix   = ".download-"
	ingestInfix     = ".ingest-"
)

// newInstanceID returns the random id of a database instance: the files of
// two instances never share a name, though Pebble numbers them from 1 in
// every new database.
func newInstanceID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("kv: random database instance id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// Instance returns the database instance's random id, 16 hex digits.
func (d *DB) Instance() string { return d.instance }

// Reader returns the database for reads on the owner's goroutine.
func (d *DB) Reader() pebble.Reader { return d.db }

// Checkpoint flushes the memtable and writes a Pebble checkpoint of the
// database (hard links to its immutable files, copies of the small ones)
// into a new directory next to the database's, and returns that
// directory. The caller removes it.
func (d *DB) Checkpoint(id uint64) (string, error) {
	dir := d.dir + checkpointInfix + strconv.FormatUint(id, 10)
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("kv: removing %s: %w", dir, err)
	}
	if err := d.db.Flush(); err != nil {
		return "", fmt.Errorf("kv: flushing the database in %s: %w", d.dir, err)
	}
	if err := d.db.Checkpoint(dir); err != nil {
		return "", fmt.Errorf("kv: checkpointing the database in %s into %s: %w", d.dir, dir, err)
	}
	return dir, nil
}

// DownloadDir returns a new, empty directory next to the database's (or,
// for base "", in the system's temporary directory) to download a
// checkpoint's database into. The caller removes it.
func DownloadDir(base string) (string, error) {
	if base == "" {
		return os.MkdirTemp("", "exactly-restore-")
	}
	return os.MkdirTemp(filepath.Dir(base), filepath.Base(base)+downloadInfix)
}

// removeScratch removes the scratch directories of the database in dir.
func removeScratch(dir string) error {
	entries, err := os.ReadDir(filepath.Dir(dir))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("kv: listing %s: %w", filepath.Dir(dir), err)
	}
	base := filepath.Base(dir)
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, base+checkpointInfix) || strings.HasPrefix(name, base+downloadInfix) || strings.HasPrefix(name, base+ingestInfix) {
			if err := os.RemoveAll(filepath.Join(filepath.Dir(dir), name)); err != nil {
				return fmt.Errorf("kv: removing %s: %w", name, err)
			}
		}
	}
	return nil
}

// Files is a read-only database opened from a downloaded checkpoint.
type Files struct {
	dir string
	db  *pebble.DB
}

// OpenFiles opens the database whose files are in dir read-only.
func OpenFiles(dir string) (*Files, error) {
	db, err := pebble.Open(dir, &pebble.Options{ReadOnly: true, Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("kv: opening the checkpoint's database in %s: %w", dir, err)
	}
	return &Files{dir: dir, db: db}, nil
}

// Reader returns the database for reads.
func (f *Files) Reader() pebble.Reader { return f.db }

// Close closes the database and removes its directory.
func (f *Files) Close() error {
	err := f.db.Close()
	if rerr := os.RemoveAll(f.dir); err == nil && rerr != nil {
		err = fmt.Errorf("kv: removing %s: %w", f.dir, rerr)
	}
	return err
}
