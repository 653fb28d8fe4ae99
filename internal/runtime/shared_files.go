package runtime

import (
	"fmt"
	"io"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/checkpoint/store"
)

// sharedFiles is the shared directory of the job's checkpoint storage for
// one attempt: uploads go to the job's storage, reads to the storage of
// the checkpoint the attempt restores (dir; "" on a fresh start).
type sharedFiles struct {
	store store.Storage
	dir   string
	// own is set when dir is in the job's storage (not a RestoreFrom
	// checkpoint elsewhere).
	own bool
}

func (s sharedFiles) Reusable() bool { return s.own }

func (s sharedFiles) WriteShared(id checkpoint.ID, key string, r io.ReadSeeker, size int64) (checkpoint.SharedFile, error) {
	return s.store.WriteShared(id, key, r, size)
}

func (s sharedFiles) ReadShared(f checkpoint.SharedFile, w io.Writer) error {
	if s.dir == "" {
		return fmt.Errorf("reading shared file %s: the attempt restores no checkpoint", f.Name)
	}
	return s.store.ReadSharedAt(s.dir, f, w)
}
