package state

import (
	"sync"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// uploads remembers which files of a Pebble database incremental snapshots
// uploaded. A file is reused without uploading it again only once a
// completed checkpoint refers to it: then the newest completed checkpoint
// refers to it too (a database file, once gone, never comes back), and the
// storage keeps every file that checkpoint needs. A file uploaded for a
// checkpoint that never completes is uploaded again, under a new name, by
// the next one, and the storage sweeps the orphan.
type uploads struct {
	mu sync.Mutex
	// pending holds, per checkpoint not yet known to be complete, the
	// shared files of its database files, by database file name.
	pending map[checkpoint.ID]map[string]checkpoint.SharedFile
	// confirmed holds the shared files of the newest completed checkpoint.
	confirmed map[string]checkpoint.SharedFile
}

// reusable returns the shared file that holds the database file name, if
// a completed checkpoint refers to it.
func (u *uploads) reusable(name string) (checkpoint.SharedFile, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f, ok := u.confirmed[name]
	return f, ok
}

// record notes the shared files of checkpoint id's database files.
func (u *uploads) record(id checkpoint.ID, files map[string]checkpoint.SharedFile) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pending == nil {
		u.pending = map[checkpoint.ID]map[string]checkpoint.SharedFile{}
	}
	u.pending[id] = files
}

// completed notes that checkpoint id and every lower one completed.
func (u *uploads) completed(id checkpoint.ID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	newest, found := checkpoint.ID(0), false
	for pid := range u.pending {
		if pid <= id && (!found || pid > newest) {
			newest, found = pid, true
		}
	}
	if !found {
		return
	}
	u.confirmed = u.pending[newest]
	for pid := range u.pending {
		if pid <= id {
			delete(u.pending, pid)
		}
	}
}

// adopt notes that the database's files named in files are those of the
// restored checkpoint, whose shared files are in the storage the next
// checkpoints write to: they reuse them as a completed checkpoint's.
func (u *uploads) adopt(files map[string]checkpoint.SharedFile) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.confirmed = files
}

// retainLocal removes the local copies that no checkpoint after id will
// refer to: those the newest completed checkpoint does not refer to and
// that were uploaded for id or a lower one.
func (u *uploads) retainLocal(local kv.LocalFiles, id checkpoint.ID) error {
	u.mu.Lock()
	names := make(map[string]bool, len(u.confirmed))
	for _, f := range u.confirmed {
		names[f.Name] = true
	}
	u.mu.Unlock()
	return local.Retain(func(name string) bool {
		up, ok := format.SharedID(name)
		return names[name] || ok && up > id
	})
}
