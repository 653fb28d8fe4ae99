package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// RestoreDBs merges the state of the owned key groups from the databases
// of incremental snapshots (those of every former subtask whose key groups
// overlap this backend's), reading their shared files from files. Each
// database is downloaded into a new directory (next to the Pebble
// backend's database, or in the system's temporary directory for the heap
// backend), opened read-only, and the owned key groups are restored from
// it one at a time as Restore restores a blob, with the same checks; the
// rest of its key groups is left out. So an incremental checkpoint
// restores with any parallelism, and into either backend. Register every
// state before. On error the backend may hold part of the state: discard
// it.
func (b *KeyedBackend[K]) RestoreDBs(dbs []checkpoint.DBFiles, files checkpoint.SharedFiles) error {
	for _, db := range dbs {
		keys := KeyGroupRange{Start: max(db.KeyGroupStart, b.owned.Start), End: min(db.KeyGroupEnd, b.owned.End)}
		if keys.Start >= keys.End {
			continue
		}
		if err := b.restoreDB(db, keys, files); err != nil {
			return fmt.Errorf("state: restore the database of key groups [%d, %d): %w", db.KeyGroupStart, db.KeyGroupEnd, err)
		}
	}
	return nil
}

// restoreDB restores the key groups keys from db.
func (b *KeyedBackend[K]) restoreDB(db checkpoint.DBFiles, keys KeyGroupRange, files checkpoint.SharedFiles) error {
	if _, err := dbSections[K](db.States, nil); err != nil {
		return err
	}
	if files == nil && slices.ContainsFunc(db.Files, func(f checkpoint.DBFile) bool { return f.Shared.Name != "" }) {
		return errors.New("the checkpoint's shared files cannot be read here: restore it through the job's checkpoint storage")
	}
	base := ""
	if b.disk != nil {
		base = b.disk.db.Dir()
	}
	dir, err := kv.DownloadDir(base)
	if err != nil {
		return err
	}
	if err := download(dir, db.Files, files); err != nil {
		os.RemoveAll(dir)
		return err
	}
	src, err := kv.OpenFiles(dir)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	// The states with a TTL leave out what had expired when the
	// checkpoint was taken, by the clocks the database recorded then.
	clocks, err := readTTLClocks(src.Reader(), db.KeyGroupStart)
	var sections []capturedSection[K]
	if err == nil {
		sections, err = dbSections[K](db.States, clocks)
	}
	if err == nil {
		err = b.restoreFrom(src, sections, keys)
	}
	return errors.Join(err, src.Close())
}

// restoreFrom restores the key groups keys of the sections from src, one
// key group at a time.
func (b *KeyedBackend[K]) restoreFrom(src *kv.Files, sections []capturedSection[K], keys KeyGroupRange) error {
	for kg := keys.Start; kg < keys.End; kg++ {
		blobs, err := encodeSections(sections, src.Reader(), b.keyCodec, b.maxParallelism, KeyGroupRange{Start: kg, End: kg + 1})
		if err != nil {
			return err
		}
		if blob := blobs[kg]; blob != nil {
			if err := b.Restore(kg, blob); err != nil {
				return err
			}
		}
	}
	return nil
}

// download writes the database files into dir: the inline ones from the
// snapshot, the shared ones read (and verified) from files.
func download(dir string, dbFiles []checkpoint.DBFile, files checkpoint.SharedFiles) error {
	for _, f := range dbFiles {
		data := f.Data
		if f.Shared.Name != "" {
			var err error
			if data, err = files.ReadShared(f.Shared); err != nil {
				return err
			}
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// dbSections returns readers of a database's states, in name order: the
// encoders the Pebble backend's snapshots use, for the states' ids, which
// leave out the entries of states with a TTL that expired by the clocks
// the database recorded (none for a state without a recorded clock).
func dbSections[K comparable](states []checkpoint.DBState, clocks map[uint32]int64) ([]capturedSection[K], error) {
	var sections []capturedSection[K]
	for _, st := range states {
		c := diskCapture[K]{t: diskTable[K]{id: st.ID}, cutoff: noTime}
		kind := stateKind(st.Kind)
		if kind.hasTTL() {
			c.ttl = true
			if clock, ok := clocks[st.ID]; ok {
				c.cutoff = clock
			}
		}
		var data capturedTable[K]
		switch kind.base() {
		case kindValue:
			data = diskValueCapture[K]{c}
		case kindMap:
			data = diskMapCapture[K]{c}
		case kindList:
			data = diskListCapture[K]{c}
		default:
			return nil, format.CorruptBlob("the checkpoint's database lists %s as a state of kind %v", displayName(st.Name), kind)
		}
		sections = append(sections, capturedSection[K]{name: st.Name, kind: stateKind(st.Kind), data: data})
	}
	slices.SortFunc(sections, func(a, b capturedSection[K]) int { return strings.Compare(a.name, b.name) })
	return sections, nil
}
