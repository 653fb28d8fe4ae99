package state

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/exactlyonce/exactly/checkpoint"
)

// Incremental snapshots of the heap backend: a heap chain.
//
// A heap backend whose states are all value and map states without a TTL
// takes a checkpoint given shared files as a chain of files in them (the
// format is in heap_chain_file.go): a full snapshot, then change sets,
// each holding the entries of the keys written or removed since the
// newest completed checkpoint's chain, which it extends. A checkpoint's
// snapshot lists its chain as one checkpoint.DBFiles whose files are
// named heapChainPrefix and the checkpoint's id, so that retention,
// rescaling and restores keep and hand out its files as they do a Pebble
// database's. A checkpoint that changed nothing refers to the chain before
// it and writes no file.
//
// A checkpoint that finds more than half the keys held at the checkpoint
// before changed takes a full snapshot and starts no chain: a change set
// would cost as much. The snapshot is inline under the inline size (see
// chainInlineBelow), in a file of its own otherwise, which no change set
// extends. Keys added do not
// count: a growing state's change sets hold its new keys, where full
// snapshots would write every key again at each checkpoint. The first
// checkpoint knows no changes yet: it is full, and starts a chain unless
// it stays inline (see chainInlineBelow).
//
// A chain restarts with a full snapshot when it adds up to more than twice
// the state's bytes (estimated: see chainFiles.outgrown), so that a
// restore reads at most about twice the state; when it has maxChainFiles
// files; and while the backend has timers: change sets do not hold them.
// Savepoints stay full and inline.

// heapChainPrefix starts the name of every file of a heap chain.
const heapChainPrefix = "heapsnap-"

// maxChainFiles is the most files a heap chain has.
const maxChainFiles = 32

// chainInlineBelow is the size under which a full snapshot starts no
// chain when BackendConfig.HeapInlineBytes is 0: its blobs stay inline in
// the state file, one object fewer per checkpoint, and the next checkpoint
// is full again. Writing a small state whole costs less than a file of its
// own (Flink inlines state handles under 20 KiB,
// state.storage.fs.memory-threshold, for the same reason).
var chainInlineBelow = DefaultHeapInlineBytes

// inlineBytes returns the size under which a full snapshot stays inline.
func (b *KeyedBackend[K]) inlineBytes() int {
	switch {
	case b.inlineBelow < 0:
		return 0
	case b.inlineBelow > 0:
		return b.inlineBelow
	}
	return chainInlineBelow
}

// deltaTable is a table whose changes a heap chain can write.
type deltaTable[K comparable] interface {
	table[K]
	// trackChanges starts recording the keys written from now on and
	// reports whether it was recording already.
	trackChanges() bool
	// stopTracking stops recording and forgets the keys recorded.
	stopTracking()
	// takeChanges returns the keys written since the last call and starts
	// a new set.
	takeChanges() map[K]struct{}
	// captureKeys captures the entries of keys the table holds, as capture
	// does, and returns the others as removed.
	captureKeys(keys map[K]struct{}) (capturedTable[K], []K)
	// keys returns the number of keys the table holds.
	keys() int
}

// changedKeys records the keys a heap table writes, for its deltaTable
// methods: nothing before trackChanges.
type changedKeys[K comparable] struct {
	written map[K]struct{} // since the last takeChanges; nil while not recording
}

// note records k as written, if recording.
func (c *changedKeys[K]) note(k K) {
	if c.written != nil {
		c.written[k] = struct{}{}
	}
}

func (c *changedKeys[K]) trackChanges() bool {
	if c.written != nil {
		return true
	}
	c.written = make(map[K]struct{})
	return false
}

func (c *changedKeys[K]) stopTracking() { c.written = nil }

func (c *changedKeys[K]) takeChanges() map[K]struct{} {
	out := c.written
	c.written = make(map[K]struct{}, len(out))
	return out
}

// heapChain is a heap backend's chain: what its completed checkpoints
// wrote and the changes since. Its mutex guards committed and pending
// against the snapshots' encoders.
type heapChain[K comparable] struct {
	instance string // unique to this backend: shared file keys start with it
	mu       sync.Mutex
	// committed is the chain of the newest completed checkpoint that had
	// one, or the one restored.
	committed chainFiles
	// pending holds the captures taken since, oldest first.
	pending []pendingChanges[K]
	// quiet counts the captures left while the tables record no changes,
	// backoff how many the last busy capture set (see track).
	quiet, backoff int
	// held is the number of keys the tables held at the last capture.
	held int
}

// quietCheckpoints is the most captures the tables of a busy backend
// record no changes for.
const quietCheckpoints = 15

// chainFiles is one checkpoint's heap chain.
type chainFiles struct {
	files  []checkpoint.DBFile
	timers bool // its full snapshot holds timers
	// fullKeys is the number of keys the tables held when its full
	// snapshot was captured; 0 when not known (a restored chain).
	fullKeys int
}

// full returns the size of its full snapshot and of its change sets.
func (c chainFiles) sizes() (full, changes int64) {
	for i, f := range c.files {
		if i == 0 {
			full = f.Shared.Size
		} else {
			changes += f.Shared.Size
		}
	}
	return full, changes
}

// outgrown reports whether the chain has grown to more than twice the
// state a restore of it rebuilds: the state's size is estimated from the
// keys held now at its full snapshot's bytes per key (at its full
// snapshot's size when the state did not grow or fullKeys is not known).
// A growing state's change sets hold mostly new keys, which a restore
// keeps.
func (c chainFiles) outgrown(held int) bool {
	full, changes := c.sizes()
	state := full
	if c.fullKeys > 0 && held > c.fullKeys {
		state = full * int64(held) / int64(c.fullKeys)
	}
	return full+changes > 2*state
}

// pendingChanges are the keys one capture found written, per state.
type pendingChanges[K comparable] struct {
	id      checkpoint.ID
	changes map[string]map[K]struct{}
	chain   *chainFiles // its chain, once written
}

func newHeapChain[K comparable]() *heapChain[K] {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &heapChain[K]{instance: hex.EncodeToString(b[:])}
}

// deltaTables returns the backend's states by name, or false if one of
// them cannot be written as changes (a list, a state with a TTL) or the
// backend is not the heap backend.
func (b *KeyedBackend[K]) deltaTables() (map[string]deltaTable[K], bool) {
	if b.disk != nil {
		return nil, false
	}
	out := make(map[string]deltaTable[K], len(b.tables))
	for name, t := range b.tables {
		if name == timersName || name == eventTimersName {
			continue
		}
		d, ok := t.(deltaTable[K])
		if !ok {
			return nil, false
		}
		out[name] = d
	}
	return out, true
}

// hasTimers reports whether the backend holds any timer.
func (b *KeyedBackend[K]) hasTimers() bool {
	for _, s := range []timerStore[K]{b.timers, b.eventTimers} {
		if q, ok := s.(*timerQueue[K]); !ok || !q.empty() {
			return true
		}
	}
	return false
}

// snapshotChain captures checkpoint id as a heap chain in files; ok is
// false if the backend cannot take one (see deltaTables).
func (b *KeyedBackend[K]) snapshotChain(id checkpoint.ID, files checkpoint.SharedFiles) (encode func() (checkpoint.SubtaskSnapshot, error), ok bool) {
	tables, ok := b.deltaTables()
	if !ok {
		return nil, false
	}
	if b.chain == nil {
		b.chain = newHeapChain[K]()
	}
	c := b.chain
	timers := b.hasTimers()

	c.mu.Lock()
	busy, changes := c.track(tables)
	base := c.committed
	c.pending = append(c.pending, pendingChanges[K]{id: id, changes: changes})
	full := busy || timers || base.timers || len(base.files) == 0 ||
		len(base.files) >= maxChainFiles || base.outgrown(c.held)
	var sections []capturedSection[K]
	if full {
		sections = b.captureSections(func(table[K]) bool { return true })
	} else {
		sections = b.captureChanges(tables, c.pending)
	}
	c.mu.Unlock()

	keyCodec, maxParallelism, owned, inline, held, spillDir := b.keyCodec, b.maxParallelism, b.owned, b.inlineBytes(), c.held, b.spillDir
	return func() (checkpoint.SubtaskSnapshot, error) {
		chain := chainFiles{timers: timers, fullKeys: base.fullKeys}
		if full {
			chain.fullKeys = held
		}
		if !full && len(sections) == 0 {
			chain.files = base.files
		} else {
			out := &chainWriter{dir: spillDir, limit: inline}
			defer out.close()
			if err := encodeInBatches(sections, keyCodec, maxParallelism, owned, out.put); err != nil {
				return checkpoint.SubtaskSnapshot{}, fmt.Errorf("state: snapshot for checkpoint %d: %w", id, err)
			}
			if full && !out.spilled() {
				c.written(id, chain)
				return checkpoint.SubtaskSnapshot{KeyGroups: out.inMemory()}, nil
			}
			data, size, err := out.file()
			var f checkpoint.SharedFile
			if err == nil {
				f, err = files.WriteShared(id, c.instance+"-heap", data, size)
			}
			if err != nil {
				return checkpoint.SubtaskSnapshot{}, fmt.Errorf("state: snapshot for checkpoint %d: %w", id, err)
			}
			written := checkpoint.DBFile{Name: heapChainFileName(id), Shared: f}
			if busy {
				// A file of its own, which starts no chain: the
				// changes since it are not recorded.
				c.written(id, chain)
				return checkpoint.SubtaskSnapshot{DBs: []checkpoint.DBFiles{{
					KeyGroupStart: owned.Start, KeyGroupEnd: owned.End, Files: []checkpoint.DBFile{written},
				}}}, nil
			}
			if !full {
				chain.files = slices.Clone(base.files)
			}
			chain.files = append(chain.files, written)
		}
		c.written(id, chain)
		return checkpoint.SubtaskSnapshot{DBs: []checkpoint.DBFiles{{
			KeyGroupStart: owned.Start, KeyGroupEnd: owned.End, Files: chain.files,
		}}}, nil
	}, true
}

// track takes the keys the tables recorded as written since the last
// capture and reports whether the capture is busy: most keys held at the
// last capture changed (keys added do not count), so that a change set
// would cost what a full snapshot does, or the changes are not known. A busy capture takes a full snapshot, inline, and starts
// no chain.
//
// A backend whose keys mostly change every interval would pay for
// recording them for nothing: once a capture finds that, the tables stop
// recording for the next capture, twice as many after each busy finding in
// a row up to quietCheckpoints (a state that grows from empty is busy for
// a while, then not), the chain is dropped (its changes stop being
// known), and they record again from the last of those captures on, so
// that the next one knows one interval's changes. Call it with c.mu held.
func (c *heapChain[K]) track(tables map[string]deltaTable[K]) (busy bool, changes map[string]map[K]struct{}) {
	if c.quiet > 0 {
		c.held = heldKeys(tables)
		if c.quiet--; c.quiet == 0 {
			for _, t := range tables {
				t.trackChanges()
			}
		}
		return true, nil
	}
	tracked := true
	for _, t := range tables {
		tracked = t.trackChanges() && tracked
	}
	changes = make(map[string]map[K]struct{}, len(tables))
	changed := 0
	for name, t := range tables {
		changes[name] = t.takeChanges()
		changed += len(changes[name])
	}
	before, held := c.held, heldKeys(tables)
	c.held = held
	if !tracked {
		// The changes are not known: a full snapshot. Without a chain
		// (the first capture) it may start one; with one, it is busy, so
		// that it stays inline and the chain is not extended.
		return len(c.committed.files) > 0, changes
	}
	// The keys added since the last capture are among the changed ones;
	// what makes a capture busy is how many of the keys held before it
	// changed. A growing state (new keys, few rewritten) is not busy: its
	// change sets hold the new keys, where full snapshots would write
	// every key again at each capture.
	if 2*(changed-max(0, held-before)) <= before {
		c.backoff = 0
		return false, changes
	}
	for _, t := range tables {
		t.stopTracking()
	}
	c.backoff = min(max(2*c.backoff, 1), quietCheckpoints)
	c.quiet = c.backoff
	c.pending, c.committed = nil, chainFiles{}
	return true, nil
}

// heldKeys returns the number of keys the tables hold.
func heldKeys[K comparable](tables map[string]deltaTable[K]) int {
	n := 0
	for _, t := range tables {
		n += t.keys()
	}
	return n
}

// captureChanges captures the entries of the keys that the captures since
// the committed chain found written, in sections of the tables' names:
// the entries held and the keys removed. It leaves out the tables without
// changes.
func (b *KeyedBackend[K]) captureChanges(tables map[string]deltaTable[K], pending []pendingChanges[K]) []capturedSection[K] {
	var sections []capturedSection[K]
	for _, name := range b.names {
		t, ok := tables[name]
		if !ok {
			continue
		}
		keys := pending[len(pending)-1].changes[name]
		if len(pending) > 1 {
			keys = maps.Clone(keys)
			for _, p := range pending[:len(pending)-1] {
				maps.Copy(keys, p.changes[name])
			}
		}
		if len(keys) == 0 {
			continue
		}
		held, removed := t.captureKeys(keys)
		sections = append(sections, capturedSection[K]{name: name, kind: t.kind(), data: held})
		if len(removed) > 0 {
			sections = append(sections, capturedSection[K]{name: name, kind: kindRemoved, data: removedKeys[K](removed)})
		}
	}
	return sections
}

// removedKeys is a change set's section of removed keys.
type removedKeys[K comparable] []K

// encode writes one entry per key: the key alone.
func (r removedKeys[K]) encode(w *sectionWriter[K]) error {
	for _, k := range r {
		if _, _, err := w.key(k); err != nil {
			return err
		}
	}
	return nil
}

// written records the chain checkpoint id's snapshot wrote (no files: it
// kept its blobs inline).
func (c *heapChain[K]) written(id checkpoint.ID, chain chainFiles) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range c.pending {
		if c.pending[i].id == id {
			c.pending[i].chain = &chain
		}
	}
}

// completed makes the chain of the newest capture at or before id that
// wrote one the committed chain, and forgets the captures it covers.
func (c *heapChain[K]) completed(id checkpoint.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	newest := -1
	for i, p := range c.pending {
		if p.id <= id && p.chain != nil {
			newest = i
		}
	}
	if newest < 0 {
		return
	}
	c.committed = *c.pending[newest].chain
	c.pending = slices.Delete(c.pending, 0, newest+1)
}

// heapChainFileName names the file of a heap chain written for checkpoint
// id; names sort in the chain's order.
func heapChainFileName(id checkpoint.ID) string {
	return fmt.Sprintf("%s%020d", heapChainPrefix, id)
}

// isHeapChain reports whether db is a heap chain rather than a database.
func isHeapChain(db checkpoint.DBFiles) bool {
	return len(db.Files) > 0 && strings.HasPrefix(db.Files[0].Name, heapChainPrefix)
}

// restoreChain merges the key groups keys of the heap chain db, reading
// its files from files. Each shared file is downloaded whole, its checksum
// checked, into a temporary file (see chainWriter for where), then the
// files are read side by side in key-group order, so that the restore
// holds one key group's blobs at a time, not the files. A download at the
// pace of the restore would hold a small file's request open for the
// whole restore, past the timeout its size gets.
func (b *KeyedBackend[K]) restoreChain(db checkpoint.DBFiles, keys KeyGroupRange, files checkpoint.SharedFiles) error {
	streams := make([]*chainStream, 0, len(db.Files))
	defer func() {
		for _, s := range streams {
			s.close()
		}
	}()
	for _, f := range db.Files {
		if !strings.HasPrefix(f.Name, heapChainPrefix) {
			return fmt.Errorf("heap snapshot: file %q: %w", f.Name, ErrCorrupt)
		}
		s, err := openChainStream(f, files, b.spillDir)
		if err != nil {
			return fmt.Errorf("heap snapshot file %s: %w", f.Name, err)
		}
		streams = append(streams, s)
	}
	var blobs [][]byte
	for kg := keys.Start; kg < keys.End; kg++ {
		blobs = blobs[:0]
		for _, s := range streams {
			blob, err := s.blobOf(kg)
			if err != nil {
				return fmt.Errorf("heap snapshot file %s: %w", s.name, err)
			}
			if blob != nil {
				blobs = append(blobs, blob)
			}
		}
		if len(blobs) == 0 {
			continue
		}
		merged, err := mergeChainBlobs(blobs)
		if err == nil && merged != nil {
			err = b.restore(kg, merged)
		}
		if err != nil {
			return fmt.Errorf("key group %d: %w", kg, err)
		}
	}
	for _, s := range streams {
		if err := s.finish(); err != nil {
			return fmt.Errorf("heap snapshot file %s: %w", s.name, err)
		}
	}
	return nil
}

// chainStream is one file of a heap chain being restored: its key groups
// read in order, the next one held until the restore reaches it.
type chainStream struct {
	name string
	r    *chainFileReader
	kg   int      // the key group read ahead, -1 when none
	blob []byte   // its blob
	file *os.File // the downloaded shared file; nil for inline data
}

// openChainStream starts reading the heap chain file f: its inline data,
// or its shared file, downloaded from files into a temporary file in dir
// (the system's temporary directory when empty), removed from it at once.
func openChainStream(f checkpoint.DBFile, files checkpoint.SharedFiles, dir string) (*chainStream, error) {
	s := &chainStream{name: f.Name, kg: -1}
	var src io.Reader = bytes.NewReader(f.Data)
	size := int64(len(f.Data))
	if f.Shared.Name != "" {
		if files == nil {
			return nil, fmt.Errorf("the checkpoint's shared files cannot be read here: restore it through the job's checkpoint storage")
		}
		var err error
		if s.file, err = tempFile(dir, "heapsnap-restore-*"); err != nil {
			return nil, fmt.Errorf("state: a heap snapshot file is downloaded to a temporary file: %w", err)
		}
		if err := files.ReadShared(f.Shared, s.file); err != nil {
			s.close()
			return nil, err
		}
		if _, err := s.file.Seek(0, io.SeekStart); err != nil {
			s.close()
			return nil, err
		}
		src, size = s.file, f.Shared.Size
	}
	var err error
	if s.r, err = newChainFileReader(src, size); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// blobOf returns the file's blob of key group kg, nil if it has none;
// call it for increasing key groups.
func (s *chainStream) blobOf(kg int) ([]byte, error) {
	for s.kg < kg {
		next, blob, ok, err := s.r.next()
		if err != nil {
			return nil, err
		}
		if !ok {
			s.kg, s.blob = MaxParallelismLimit+1, nil
			break
		}
		s.kg, s.blob = next, blob
	}
	if s.kg != kg {
		return nil, nil
	}
	return s.blob, nil
}

// finish reads the rest of the file, the key groups not restored
// included: the file must be whole and, shared, match its checksum.
func (s *chainStream) finish() error {
	_, err := s.blobOf(MaxParallelismLimit + 1)
	return err
}

// close closes the downloaded file, if any.
func (s *chainStream) close() {
	if s.file != nil {
		_ = s.file.Close()
	}
}

// adoptChain lets the backend's next checkpoints extend the heap chain db
// it restored whole, when it can refer to the chain's files.
func (b *KeyedBackend[K]) adoptChain(db checkpoint.DBFiles, files checkpoint.SharedFiles) {
	tables, ok := b.deltaTables()
	if !ok || files == nil || !files.Reusable() || db.KeyGroupStart != b.owned.Start || db.KeyGroupEnd != b.owned.End {
		return
	}
	c := newHeapChain[K]()
	c.committed = chainFiles{files: slices.Clone(db.Files), timers: b.hasTimers()}
	for _, t := range tables {
		t.trackChanges()
	}
	b.chain = c
}
