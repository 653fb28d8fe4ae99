package state

import (
	"errors"
	"fmt"
	"os"
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
// restores with any parallelism, and into either backend.
//
// The Pebble backend instead adopts one database when it can: the one
// sharing the most key groups with it, whose files become its own,
// clipped to its key groups, without a copy (a job whose states changed
// since copies); the next checkpoint then uploads only what changed since. Shared files kept on
// this machine by an earlier checkpoint are taken from there, not
// downloaded, when their checksums match the checkpoint's.
//
// The heap chains among dbs (a heap backend's incremental checkpoints)
// are merged per key group and restored as full blobs; a heap backend
// restored from one whole chain of its own key groups extends it.
//
// Register every state before. On error the backend may hold part of the
// state: discard it.
func (b *KeyedBackend[K]) RestoreDBs(dbs []checkpoint.DBFiles, files checkpoint.SharedFiles) error {
	var chains []checkpoint.DBFiles
	dbs = slices.DeleteFunc(slices.Clone(dbs), func(db checkpoint.DBFiles) bool {
		if isHeapChain(db) {
			chains = append(chains, db)
			return true
		}
		return false
	})
	for _, db := range chains {
		keys := b.owned.intersect(db.KeyGroupStart, db.KeyGroupEnd)
		if keys.Start >= keys.End {
			continue
		}
		if err := b.restoreChain(db, keys, files); err != nil {
			return fmt.Errorf("state: restore the heap snapshot of key groups [%d, %d): %w", db.KeyGroupStart, db.KeyGroupEnd, err)
		}
	}
	if len(chains) == 1 && len(dbs) == 0 {
		b.adoptChain(chains[0], files)
	}
	adopted, err := b.adoptDB(dbs, files)
	if err != nil {
		return err
	}
	for i, db := range dbs {
		keys := b.owned.intersect(db.KeyGroupStart, db.KeyGroupEnd)
		if i == adopted || keys.Start >= keys.End {
			continue
		}
		if err := b.restoreDB(db, keys, files); err != nil {
			return fmt.Errorf("state: restore the database of key groups [%d, %d): %w", db.KeyGroupStart, db.KeyGroupEnd, err)
		}
	}
	return nil
}

// adoptDB makes the database of one of dbs the Pebble backend's own and
// returns its index, or -1 when it adopts none: on the heap backend, when
// the backend holds state already or has a state with a TTL, or when no
// database's states are the registered ones under the same ids (a job
// that added, renamed or reordered states copies instead). It takes the database sharing the most
// key groups with the backend, deletes the key groups the backend does not
// own, and, when the checkpoint is in the storage the backend's next
// checkpoints go to, lets them refer to its shared files.
func (b *KeyedBackend[K]) adoptDB(dbs []checkpoint.DBFiles, files checkpoint.SharedFiles) (int, error) {
	if b.disk == nil || files == nil || len(b.disk.ttlIDs) > 0 {
		// A state with a TTL restores through the copy, which leaves out
		// what had expired by the checkpoint's clocks.
		return -1, nil
	}
	i := b.adoptable(dbs)
	if i < 0 {
		return -1, nil
	}
	if empty, err := b.disk.db.Empty(); err != nil || !empty {
		return -1, err
	}
	db := dbs[i]
	fail := func(err error) (int, error) {
		return -1, fmt.Errorf("state: adopt the database of key groups [%d, %d): %w", db.KeyGroupStart, db.KeyGroupEnd, err)
	}
	dir, err := kv.DownloadDir(b.disk.db.Dir())
	if err != nil {
		return fail(err)
	}
	if err := download(dir, db.Files, files, b.localFiles(), b.downloads); err != nil {
		os.RemoveAll(dir)
		return fail(err)
	}
	if err := b.disk.db.Adopt(dir); err != nil {
		os.RemoveAll(dir)
		return fail(err)
	}
	if err := b.adoptTimers(db.KeyGroupStart); err != nil {
		return fail(err)
	}
	end := kv.AppendStatePrefix(nil, uint16(b.maxParallelism), 0)
	for _, r := range [][2][]byte{
		{kv.AppendStatePrefix(nil, 0, 0), kv.AppendStatePrefix(nil, uint16(b.owned.Start), 0)},
		{kv.AppendStatePrefix(nil, uint16(b.owned.End), 0), end},
	} {
		if err := b.disk.db.DeleteRange(r[0], r[1]); err != nil {
			return fail(err)
		}
	}
	if files.Reusable() {
		shared := map[string]checkpoint.SharedFile{}
		for _, f := range db.Files {
			if f.Shared.Name != "" {
				shared[f.Name] = f.Shared
			}
		}
		b.disk.uploads.adopt(shared)
	}
	return i, nil
}

// adoptable returns the index of the database of dbs that adoptDB may
// adopt, -1 if none: of those whose states are the registered ones, the
// one sharing the most key groups with the backend.
func (b *KeyedBackend[K]) adoptable(dbs []checkpoint.DBFiles) int {
	best, most := -1, 0
	for i, db := range dbs {
		keys := b.owned.intersect(db.KeyGroupStart, db.KeyGroupEnd)
		if n := keys.End - keys.Start; n > most && sameStates(db.States, b.disk.states) {
			best, most = i, n
		}
	}
	return best
}

// sameStates reports whether a database with the states recorded has
// exactly the registered ones, each under the same id and kind.
func sameStates(recorded, registered []checkpoint.DBState) bool {
	if len(recorded) != len(registered) {
		return false
	}
	byName := make(map[string]checkpoint.DBState, len(registered))
	for _, st := range registered {
		byName[st.Name] = st
	}
	for _, st := range recorded {
		if byName[st.Name] != st {
			return false
		}
	}
	return true
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
	if err := download(dir, db.Files, files, b.localFiles(), b.downloads); err != nil {
		os.RemoveAll(dir)
		return err
	}
	src, err := kv.OpenFiles(dir)
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	if b.ingestible(db) {
		return errors.Join(b.ingestDB(src, db, keys), src.Close())
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

// ingestible reports whether restoreDB may copy the entries of db into the
// Pebble backend's database as they are (ingestDB): its states are the
// registered ones under the same ids, and none has a TTL (a copy through
// restoreFrom leaves out what had expired).
func (b *KeyedBackend[K]) ingestible(db checkpoint.DBFiles) bool {
	return b.disk != nil && len(b.disk.ttlIDs) == 0 && sameStates(db.States, b.disk.states)
}

// ingestDB copies the entries of the key groups keys of src, the database
// of db, into the Pebble backend's database as they are, in sorted tables
// that the database ingests (kv.DB.IngestFrom): a rescale to fewer
// subtasks takes the databases it does not adopt at about the speed of
// writing their files, not entry by entry through the memtables and
// compactions. The entries of state id 0 (the database's own records) are
// left out; the timers' seqs it recorded are taken, as adoptTimers does.
func (b *KeyedBackend[K]) ingestDB(src *kv.Files, db checkpoint.DBFiles, keys KeyGroupRange) error {
	seqs, err := readTimerSeqs(src.Reader(), db.KeyGroupStart)
	if err != nil {
		return err
	}
	b.dropValueCaches()
	lower := kv.AppendStatePrefix(nil, uint16(keys.Start), 0)
	upper := kv.AppendStatePrefix(nil, uint16(keys.End), 0)
	if _, err := b.disk.db.IngestFrom(src, lower, upper, func(key []byte) bool {
		id, _ := kv.StateIDOf(key)
		return id == 0
	}); err != nil {
		return err
	}
	b.timersRestored(seqs, keys)
	return nil
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

// localFiles returns the Pebble backend's local copies, nil for the heap
// backend.
func (b *KeyedBackend[K]) localFiles() *kv.LocalFiles {
	if b.disk == nil {
		return nil
	}
	return &b.disk.local
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
		case kindTimers, kindEventTimers:
			if !kind.hasTTL() {
				data = diskTimerCapture[K]{byKey: st.ID}
			}
		}
		if data == nil {
			return nil, format.CorruptBlob("the checkpoint's database lists %s as a state of kind %v", displayName(st.Name), kind)
		}
		sections = append(sections, capturedSection[K]{name: st.Name, kind: stateKind(st.Kind), data: data})
	}
	slices.SortFunc(sections, func(a, b capturedSection[K]) int { return strings.Compare(a.name, b.name) })
	return sections, nil
}
