package state

import (
	"sync"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// uploads remembers which files of a Pebble database incremental snapshots
// uploaded, and decides which a snapshot may reuse without uploading them
// again.
//
// A snapshot reuses a file only when the storage keeps it until the
// snapshot's checkpoint completes, when the checkpoint itself keeps it.
// The storage keeps the files of its newest completed checkpoints and
// deletes the others when a checkpoint completes. So a file is reusable by
// checkpoint id only when the newest checkpoint known to be complete
// refers to it (the confirmed set) and so does every checkpoint between
// that one and id: any of them may complete before id (the task hears of
// completions late, when a checkpoint outlasts the interval), and the
// storage then keeps only what that one refers to. A checkpoint that
// uploaded the file again under its own name, or whose upload has not
// decided yet, makes id upload it too. A file uploaded for a checkpoint
// that never completes is uploaded again, under a new name, by the next
// one, and the storage sweeps the orphan.
type uploads struct {
	mu sync.Mutex
	// pending holds, per checkpoint snapshotted and not yet known to be
	// complete, the shared files it refers to so far, by database file
	// name (its upload may still run).
	pending map[checkpoint.ID]map[string]checkpoint.SharedFile
	// confirmedID is the newest checkpoint known to be complete (0 for the
	// restored one) and confirmed the shared files it refers to.
	confirmedID checkpoint.ID
	confirmed   map[string]checkpoint.SharedFile
}

// begin notes that checkpoint id's snapshot was taken; its upload reports
// each file with refer. Snapshots begin in the order of their ids.
func (u *uploads) begin(id checkpoint.ID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.pending == nil {
		u.pending = map[checkpoint.ID]map[string]checkpoint.SharedFile{}
	}
	u.pending[id] = map[string]checkpoint.SharedFile{}
}

// reusable returns the shared file that checkpoint id may refer to for the
// database file name without uploading it, if there is one.
func (u *uploads) reusable(id checkpoint.ID, name string) (checkpoint.SharedFile, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	f, ok := u.confirmed[name]
	if !ok {
		return checkpoint.SharedFile{}, false
	}
	for pid, files := range u.pending {
		if pid > u.confirmedID && pid < id && files[name] != f {
			return checkpoint.SharedFile{}, false
		}
	}
	return f, true
}

// refer notes that checkpoint id refers to f for the database file name.
func (u *uploads) refer(id checkpoint.ID, name string, f checkpoint.SharedFile) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if files := u.pending[id]; files != nil {
		files[name] = f
	}
}

// failed forgets checkpoint id, whose upload failed: it never completes.
func (u *uploads) failed(id checkpoint.ID) {
	u.mu.Lock()
	defer u.mu.Unlock()
	delete(u.pending, id)
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
	u.confirmedID, u.confirmed = newest, u.pending[newest]
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
	// Every checkpoint snapshotted from now on follows the restored one.
	u.confirmedID, u.confirmed = 0, files
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
