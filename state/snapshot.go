package state

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// ErrCorrupt is wrapped by Restore's errors for blobs that are not valid
// snapshots. It is [checkpoint.ErrCorrupt], the engine's one corruption
// mark.
var ErrCorrupt = checkpoint.ErrCorrupt

// Snapshot captures all keyed state and timers synchronously and returns a function
// that encodes the capture into one blob per key group (key groups without state are
// omitted). Capturing is cheap: the heap backend copies its maps shallowly (MapState
// copies each key's map), the Pebble backend takes a Pebble snapshot of its database.
// The returned function may be called later on another goroutine while the backend
// keeps processing, and sees the state as of the Snapshot call. The Pebble backend's
// function releases the Pebble snapshot: call it once, before Close.
func (b *KeyedBackend[K]) Snapshot() func() (map[int][]byte, error) {
	sections := b.captureSections(func(table[K]) bool { return true })
	keyCodec, maxParallelism, owned := b.keyCodec, b.maxParallelism, b.owned
	if b.disk == nil {
		return func() (map[int][]byte, error) {
			return encodeSections(sections, nil, keyCodec, maxParallelism, owned)
		}
	}
	view := b.disk.db.View()
	return func() (out map[int][]byte, err error) {
		err = view.Read(func(r pebble.Reader) error {
			if err := checkOnlyOwned(r, owned, keyCodec); err != nil {
				return err
			}
			out, err = encodeSections(sections, r, keyCodec, maxParallelism, owned)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("state: snapshot: %w", err)
		}
		return out, nil
	}
}

// capturedSection is one table captured for a snapshot, under its name.
type capturedSection[K comparable] struct {
	name string
	kind stateKind
	data capturedTable[K]
}

// captureSections captures the tables that include selects, in name order.
func (b *KeyedBackend[K]) captureSections(include func(table[K]) bool) []capturedSection[K] {
	var sections []capturedSection[K]
	for _, name := range b.names {
		if t := b.tables[name]; include(t) {
			sections = append(sections, capturedSection[K]{name: name, kind: t.kind(), data: t.capture()})
		}
	}
	return sections
}

// encodeSections encodes the captured sections, in order, into one blob
// per key group of owned that has state; disk is the database view the
// Pebble backend's tables read (nil for the heap backend's).
func encodeSections[K comparable](sections []capturedSection[K], disk pebble.Reader, keyCodec Codec[K], maxParallelism int, owned KeyGroupRange) (map[int][]byte, error) {
	return encodeKeyGroups(sections, disk, keyCodec, maxParallelism, owned, owned)
}

// encodeKeyGroups is encodeSections for the key groups of batch, a range
// within owned, only: the entries of the other owned key groups are left
// out, those of key groups not owned are errors still. Only the heap
// backend's captures encode a batch smaller than owned (disk is nil).
func encodeKeyGroups[K comparable](sections []capturedSection[K], disk pebble.Reader, keyCodec Codec[K], maxParallelism int, owned, batch KeyGroupRange) (map[int][]byte, error) {
	w := &sectionWriter[K]{
		keyEnc:         appendFunc(keyCodec),
		maxParallelism: maxParallelism,
		owned:          owned,
		batch:          batch,
		disk:           disk,
		entries:        make([][]byte, batch.Len()),
		counts:         make([]int, batch.Len()),
		blobs:          make([][]byte, batch.Len()),
	}
	for _, s := range sections {
		w.headRoom = format.SectionHeaderRoom(s.name)
		if err := s.data.encode(w); err != nil {
			return nil, fmt.Errorf("state: snapshot %s: %w", displayName(s.name), err)
		}
		w.endSection(s.name, s.kind)
	}
	out := make(map[int][]byte)
	for i, blob := range w.blobs {
		if blob != nil {
			out[batch.Start+i] = blob
		}
	}
	return out, nil
}

// snapshotBatchBytes is about how many bytes of blobs encodeInBatches
// holds at once. A variable for tests.
var snapshotBatchBytes int64 = 32 << 20

// maxSnapshotBatches bounds the batches of encodeInBatches after its first:
// each reads every captured key again (its encoding and hash), which for
// many small entries costs about what encoding them does, so a large state
// of small entries holds up to an eighth of its blobs at once instead of
// snapshotBatchBytes.
const maxSnapshotBatches = 8

// encodeInBatches encodes the heap backend's captured sections a batch of
// key groups at a time and hands each key group's blob to put, in
// increasing key-group order, so that a full snapshot holds about
// snapshotBatchBytes of blobs at once instead of the state's size. The
// first batch is one key group; the next ones hold as many key groups as
// snapshotBatchBytes holds at the bytes per key group so far, and at least
// an eighth of the owned ones (maxSnapshotBatches). Each batch reads every
// captured entry again, hashing its key, but encodes only its own
// entries.
func encodeInBatches[K comparable](sections []capturedSection[K], keyCodec Codec[K], maxParallelism int, owned KeyGroupRange, put func(kg int, blob []byte) error) error {
	var bytes int64
	n := 1
	for start := owned.Start; start < owned.End; {
		batch := KeyGroupRange{Start: start, End: min(owned.End, start+n)}
		blobs, err := encodeKeyGroups(sections, nil, keyCodec, maxParallelism, owned, batch)
		if err != nil {
			return err
		}
		for kg := batch.Start; kg < batch.End; kg++ {
			if blob, ok := blobs[kg]; ok {
				bytes += int64(len(blob))
				if err := put(kg, blob); err != nil {
					return err
				}
			}
		}
		start = batch.End
		if done := int64(start - owned.Start); bytes > 0 {
			n = int(max(1, min(int64(owned.Len()), snapshotBatchBytes*done/bytes)))
		} else {
			n = min(2*n, owned.Len())
		}
		n = max(n, (owned.Len()+maxSnapshotBatches-1)/maxSnapshotBatches)
	}
	return nil
}

// sectionWriter encodes one state at a time into per-key-group sections.
type sectionWriter[K comparable] struct {
	keyEnc         func([]byte, K) ([]byte, error)
	maxParallelism int
	owned          KeyGroupRange
	batch          KeyGroupRange // the key groups encoded, within owned (see encodeKeyGroups)
	disk           pebble.Reader // the Pebble backend's view to encode; nil for the heap backend
	scratch        []byte
	entries        [][]byte // per key group of batch: entries of the current section
	counts         []int    // per key group of batch: entry count of the current section
	blobs          [][]byte // per key group of batch: finished sections
	// A key group's first section (blobs[i] still nil) is written in
	// place: its entries start after headRoom free bytes, where
	// endSection puts the blob's header, and become the blob without a
	// copy. A snapshot's blobs are most of its memory; later sections are
	// appended.
	headRoom int // format.SectionHeaderRoom of the current section's name
}

// key starts an entry for k: it writes the length-prefixed key into k's key group and
// returns that key group's index in w.entries. in is false, and no entry
// started, when k's key group is owned but outside the batch encoded: the
// caller skips k's entry.
func (w *sectionWriter[K]) key(k K) (i int, in bool, err error) {
	if w.scratch, err = w.keyEnc(w.scratch[:0], k); err != nil {
		return 0, false, fmt.Errorf("key %v: %w", k, err)
	}
	kg := KeyGroupOf(HashKey(w.scratch), w.maxParallelism)
	if !w.owned.Contains(kg) {
		return 0, false, errForeignKey(k, kg, w.owned)
	}
	if !w.batch.Contains(kg) {
		return 0, false, nil
	}
	return w.encodedKey(kg, w.scratch), true, nil
}

// errForeignKey reports state of key in key group kg, outside the owned range.
func errForeignKey(key any, kg int, owned KeyGroupRange) error {
	return fmt.Errorf("key %v is in key group %d, outside the owned range %v: records must be routed to the subtask that owns their key group", key, kg, owned)
}

// encodedKey starts an entry for the key encoded as raw, of the key group
// kg of the batch, and returns kg's index in w.entries.
func (w *sectionWriter[K]) encodedKey(kg int, raw []byte) int {
	i := kg - w.batch.Start
	if w.counts[i] == 0 && w.blobs[i] == nil {
		w.entries[i] = slices.Grow(w.entries[i][:0], w.headRoom+len(raw)+binary.MaxVarintLen64)[:w.headRoom]
	}
	w.entries[i] = format.AppendBytes(w.entries[i], raw)
	w.counts[i]++
	return i
}

// putEncoded appends the length-prefixed raw to the entry in key group
// index i.
func (w *sectionWriter[K]) putEncoded(i int, raw []byte) {
	w.entries[i] = format.AppendBytes(w.entries[i], raw)
}

// putFramed appends framed, a sequence of length-prefixed values, to the
// entry in key group index i.
func (w *sectionWriter[K]) putFramed(i int, framed []byte) {
	w.entries[i] = append(w.entries[i], framed...)
}

// putExpiry appends an expiry time to the entry in key group index i.
func (w *sectionWriter[K]) putExpiry(i int, exp int64) {
	w.entries[i] = format.AppendInt64(w.entries[i], exp)
}

// putCount appends a uvarint count to the entry in key group index i.
func (w *sectionWriter[K]) putCount(i, n int) {
	w.entries[i] = format.AppendCount(w.entries[i], n)
}

// putValue appends the length-prefixed encoding of v to the entry in key group index i.
func putValue[K comparable, V any](w *sectionWriter[K], i int, enc func([]byte, V) ([]byte, error), v V) error {
	var err error
	if w.scratch, err = enc(w.scratch[:0], v); err != nil {
		return err
	}
	w.entries[i] = format.AppendBytes(w.entries[i], w.scratch)
	return nil
}

// endSection moves the current section's entries into the blobs of the key groups that
// have any.
func (w *sectionWriter[K]) endSection(name string, kind stateKind) {
	for i, n := range w.counts {
		if n == 0 {
			continue
		}
		if w.blobs[i] == nil {
			w.blobs[i] = format.PutFirstSection(w.entries[i], name, byte(kind), n)
			w.entries[i] = nil
		} else {
			w.blobs[i] = format.AppendSection(w.blobs[i], name, byte(kind), n, w.entries[i])
			w.entries[i] = w.entries[i][:0]
		}
		w.counts[i] = 0
	}
}

// Restore merges the state of key group kg from blob, produced by Snapshot of a backend
// with the same max parallelism and any parallelism. Register every state before
// restoring. Restore fails, and changes nothing, if kg is not owned, the blob is
// malformed (the error wraps ErrCorrupt), or it holds a state that is not registered
// or is registered with another kind. A key present in the backend and the blob gets
// the blob's state.
func (b *KeyedBackend[K]) Restore(kg int, blob []byte) error {
	if !b.owned.Contains(kg) {
		return fmt.Errorf("state: restore key group %d: outside the owned range %v: restore only the key groups that RangeForSubtask gives this subtask", kg, b.owned)
	}
	if err := b.restore(kg, blob); err != nil {
		return fmt.Errorf("state: restore key group %d: %w", kg, err)
	}
	return nil
}

func (b *KeyedBackend[K]) restore(kg int, blob []byte) error {
	br, err := format.NewBlobReader(blob)
	if err != nil {
		return err
	}
	r := &sectionReader[K]{BlobReader: br, kg: kg, maxParallelism: b.maxParallelism, keyCodec: b.keyCodec}
	if b.disk != nil {
		r.disk = b.disk.db.NewBatch()
		defer r.disk.Close()
	}
	var applies []func()
	seen := make(map[string]bool)
	for r.More() {
		name, k, count, err := r.Section(displayName)
		if err != nil {
			return err
		}
		kind := stateKind(k)
		if seen[name] {
			return format.CorruptBlob("%s appears twice", displayName(name))
		}
		seen[name] = true
		if kind.hasTTL() && !kind.valid() {
			return format.CorruptBlob("%s has kind %#x, an unknown kind with a TTL", displayName(name), k)
		}
		t, ok := b.tables[name]
		if !ok {
			return fmt.Errorf("checkpoint has %s (%v), which is not registered: the operator's state declarations must match the checkpoint's", displayName(name), kind.base())
		}
		// A TTL may be added or removed between runs: only the kinds
		// without it must match.
		if t.kind().base() != kind.base() {
			return fmt.Errorf("%s is a %v state in the checkpoint but registered as a %v state: the operator's state declarations must match the checkpoint's", displayName(name), kind.base(), t.kind().base())
		}
		r.ttl = kind.hasTTL()
		apply, err := t.stage(r, count)
		if err != nil {
			return fmt.Errorf("%s: %w", displayName(name), err)
		}
		applies = append(applies, apply)
	}
	if r.disk != nil {
		if err := r.disk.Commit(pebble.NoSync); err != nil {
			return fmt.Errorf("writing the state into the Pebble database in %s: %w", b.disk.db.Dir(), err)
		}
	}
	for _, apply := range applies {
		apply()
	}
	return nil
}

// sectionReader decodes the sections of one key group's blob.
type sectionReader[K comparable] struct {
	*format.BlobReader
	kg             int
	maxParallelism int
	keyCodec       Codec[K]
	// disk collects the writes of the Pebble backend's tables, which
	// Restore commits once the whole blob is valid; nil for the heap
	// backend.
	disk *pebble.Batch
	// ttl is set while the current section's entries carry expiry times.
	ttl bool
}

// expiry reads an entry's expiry time if the section's entries carry them;
// ok is false if they do not.
func (r *sectionReader[K]) expiry() (exp int64, ok bool, err error) {
	if !r.ttl {
		return 0, false, nil
	}
	exp, err = r.Int64()
	return exp, err == nil, err
}

// key reads a length-prefixed key and checks that it belongs to the key group.
func (r *sectionReader[K]) key() (K, error) {
	k, _, err := r.encodedKey()
	return k, err
}

// encodedKey reads a length-prefixed key, checks that it belongs to the key
// group and decodes, and returns it decoded and encoded (aliasing the blob).
func (r *sectionReader[K]) encodedKey() (K, []byte, error) {
	var zero K
	raw, err := r.Bytes()
	if err != nil {
		return zero, nil, err
	}
	if kg := KeyGroupOf(HashKey(raw), r.maxParallelism); kg != r.kg {
		return zero, nil, format.CorruptBlob("a key of key group %d in the blob of key group %d (was the checkpoint taken with another max parallelism?)", kg, r.kg)
	}
	k, err := r.keyCodec.Decode(raw)
	if err != nil {
		return zero, nil, format.CorruptBlob("key: %w", err)
	}
	return k, raw, nil
}

// readValue reads a length-prefixed value and decodes it with c.
func readValue[K comparable, V any](r *sectionReader[K], c Codec[V]) (V, error) {
	v, _, err := readEncoded(r, c)
	return v, err
}

// readEncoded reads a length-prefixed value, checks that c decodes it, and
// returns it decoded and encoded (aliasing the blob).
func readEncoded[K comparable, V any](r *sectionReader[K], c Codec[V]) (V, []byte, error) {
	raw, err := r.Bytes()
	if err != nil {
		var zero V
		return zero, nil, err
	}
	v, err := c.Decode(raw)
	if err != nil {
		return v, nil, format.CorruptBlob("value: %w", err)
	}
	return v, raw, nil
}
