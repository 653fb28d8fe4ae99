package state

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// SnapshotFor captures the state for checkpoint or savepoint id of the
// given kind and returns a function that encodes it, as Snapshot does,
// into a subtask snapshot (KeyGroups, and DBs for an incremental one).
//
// On the Pebble backend a checkpoint (not a savepoint) is incremental when
// files is not nil: SnapshotFor flushes the database and takes a Pebble
// checkpoint of it into a directory next to the database's (hard links);
// the returned function uploads to files the database files no completed
// checkpoint refers to yet, keeps the small ones (MANIFEST, OPTIONS...) in
// the snapshot, and removes the directory. The timers are in the database
// too, so the snapshot has no key-group blobs. On the heap backend a
// checkpoint given files is a heap chain when the states allow one (see
// heap_chain.go): a full snapshot or the changes since the newest
// completed checkpoint, written to files. Savepoints, the other heap
// backends, and a nil files take a full snapshot: a savepoint must not
// depend on files that retention may delete. Call the returned function
// once, before Close.
func (b *KeyedBackend[K]) SnapshotFor(id checkpoint.ID, kind checkpoint.Kind, files checkpoint.SharedFiles) (func() (checkpoint.SubtaskSnapshot, error), error) {
	if files != nil && kind == checkpoint.KindCheckpoint {
		if encode, ok := b.snapshotChain(id, files); ok {
			return encode, nil
		}
	}
	if b.disk == nil || files == nil || kind != checkpoint.KindCheckpoint {
		encode := b.Snapshot()
		return func() (checkpoint.SubtaskSnapshot, error) {
			groups, err := encode()
			return checkpoint.SubtaskSnapshot{KeyGroups: groups}, err
		}, nil
	}
	b.writeBackCaches()
	b.disk.writeTTLClocks()
	b.writeTimerSeqs()
	if err := checkOnlyOwned(b.disk.db.Reader(), b.owned, b.keyCodec); err != nil {
		return nil, fmt.Errorf("state: snapshot: %w", err)
	}
	dir, err := b.disk.db.Checkpoint(uint64(id))
	if err != nil {
		return nil, fmt.Errorf("state: snapshot for checkpoint %d: %w", id, err)
	}
	owned := b.owned
	db := checkpoint.DBFiles{KeyGroupStart: owned.Start, KeyGroupEnd: owned.End, States: slices.Clone(b.disk.states)}
	up := newUpload(id, dir, b.disk.db.Instance(), files, &b.disk.uploads, b.disk.local)
	return func() (checkpoint.SubtaskSnapshot, error) {
		defer os.RemoveAll(dir)
		var err error
		if db.Files, err = up.run(); err != nil {
			return checkpoint.SubtaskSnapshot{}, fmt.Errorf("state: snapshot for checkpoint %d: %w", id, err)
		}
		return checkpoint.SubtaskSnapshot{DBs: []checkpoint.DBFiles{db}}, nil
	}, nil
}

// CheckpointComplete tells the backend that checkpoint id and every lower
// one completed: the files their incremental snapshots uploaded are reused
// from now on instead of being uploaded again, and the local copies no
// later checkpoint will refer to are removed.
func (b *KeyedBackend[K]) CheckpointComplete(id checkpoint.ID) error {
	if b.chain != nil {
		b.chain.completed(id)
	}
	if b.disk == nil {
		return nil
	}
	b.disk.uploads.completed(id)
	if err := b.disk.uploads.retainLocal(b.disk.local, id); err != nil {
		return fmt.Errorf("state: removing local copies of checkpoint files: %w", err)
	}
	return nil
}

// upload uploads the files of one Pebble checkpoint.
type upload struct {
	id       checkpoint.ID
	dir      string // the Pebble checkpoint
	instance string // the database instance's id, which shared names start with
	files    checkpoint.SharedFiles
	uploads  *uploads
	local    kv.LocalFiles
}

// newUpload returns the upload of checkpoint id's Pebble checkpoint in
// dir, noting in uploads that its snapshot was taken: call it when the
// snapshot is taken, in the order of the checkpoints, and run it later.
func newUpload(id checkpoint.ID, dir, instance string, files checkpoint.SharedFiles, uploads *uploads, local kv.LocalFiles) *upload {
	uploads.begin(id)
	return &upload{id: id, dir: dir, instance: instance, files: files, uploads: uploads, local: local}
}

// run returns the checkpoint's files, sorted by name: the immutable ones
// (tables and blob files) as shared files, uploaded unless they may be
// reused (see uploads), the others inline.
func (u *upload) run() ([]checkpoint.DBFile, error) {
	out, err := u.dbFiles()
	if err != nil {
		u.uploads.failed(u.id)
	}
	return out, err
}

func (u *upload) dbFiles() ([]checkpoint.DBFile, error) {
	entries, err := os.ReadDir(u.dir)
	if err != nil {
		return nil, err
	}
	var out []checkpoint.DBFile
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("%s in the Pebble checkpoint %s is not a regular file", e.Name(), u.dir)
		}
		f := checkpoint.DBFile{Name: e.Name()}
		if immutableFile(f.Name) {
			if f.Shared, err = u.share(f.Name); err != nil {
				return nil, err
			}
			u.uploads.refer(u.id, f.Name, f.Shared)
		} else if f.Data, err = os.ReadFile(filepath.Join(u.dir, f.Name)); err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// share returns the shared file holding the database file name, uploading
// it unless it may be reused.
func (u *upload) share(name string) (checkpoint.SharedFile, error) {
	if f, ok := u.uploads.reusable(u.id, name); ok {
		return f, nil
	}
	path := filepath.Join(u.dir, name)
	f, err := uploadFile(u.files, u.id, u.instance+"-"+name, path)
	if err != nil {
		return f, err
	}
	// The local copy only spares a restore on this machine a download: a
	// file that cannot be kept is downloaded then.
	_ = u.local.Keep(f.Name, path)
	return f, nil
}

// uploadFile streams the file at path to files as the shared file key of
// checkpoint id.
func uploadFile(files checkpoint.SharedFiles, id checkpoint.ID, key, path string) (checkpoint.SharedFile, error) {
	src, err := os.Open(path)
	if err != nil {
		return checkpoint.SharedFile{}, err
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return checkpoint.SharedFile{}, err
	}
	return files.WriteShared(id, key, src, fi.Size())
}

// immutableFile reports whether a Pebble file never changes once written,
// under the same name, for the life of the database: its tables and blob
// files, which checkpoints share.
func immutableFile(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}
