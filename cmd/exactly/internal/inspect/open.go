package inspect

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint/store"
)

// Open opens the checkpoint storage at location for reading, creating
// nothing: a job's storage (a directory or an s3:// URL), or one of its
// checkpoint or savepoint directories (chk-… or sp-…), whose path it then
// returns as dir ("" otherwise).
func Open(location string) (st store.Storage, dir string, err error) {
	if strings.HasPrefix(location, "s3://") {
		u, err := url.Parse(location)
		if err != nil {
			return nil, "", fmt.Errorf("%q is not a URL: use s3://bucket/prefix?endpoint=host:port", location)
		}
		if base := filepath.Base(u.Path); isCheckpointDir(base) {
			dir = location
			u.Path = filepath.Dir(u.Path)
			if strings.HasPrefix(base, "sp-") {
				u.Path = filepath.Dir(u.Path)
			}
		}
		st, err = store.OpenStorage(u.String(), store.Options{})
		return st, dir, err
	}
	path := strings.TrimPrefix(location, "file://")
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", fmt.Errorf("%w: give the job's checkpoint directory (Options.CheckpointDir) or one of its chk-… or sp-… directories", err)
	}
	if !fi.IsDir() {
		return nil, "", fmt.Errorf("%s is not a directory: give the job's checkpoint directory or one of its chk-… or sp-… directories", path)
	}
	root := path
	if base := filepath.Base(filepath.Clean(path)); isCheckpointDir(base) {
		dir = path
		root = filepath.Dir(filepath.Clean(path))
		if strings.HasPrefix(base, "sp-") {
			root = filepath.Dir(root)
		}
	}
	// Opening a directory creates its savepoints directory: refuse one
	// that is no checkpoint storage rather than write into it.
	if _, err := os.Stat(filepath.Join(root, "savepoints")); err != nil {
		return nil, "", fmt.Errorf("%s is not a job's checkpoint directory (it has no savepoints directory): give the directory of Options.CheckpointDir", root)
	}
	st, err = store.OpenStorage(root, store.Options{})
	return st, dir, err
}

// isCheckpointDir reports whether name is that of a checkpoint or
// savepoint directory.
func isCheckpointDir(name string) bool {
	return strings.HasPrefix(name, "chk-") || strings.HasPrefix(name, "sp-")
}
