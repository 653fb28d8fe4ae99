package state

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"

	"github.com/exactlyonce/exactly/state/internal/kv"
)

// BackendKind names a keyed-state backend.
type BackendKind uint8

const (
	// HeapBackend keeps keyed state in Go maps: the fastest, and bounded by
	// the memory of the process. The default.
	HeapBackend BackendKind = iota
	// PebbleBackend keeps Value, Map and List state and both kinds of
	// timers on disk, in one Pebble database per keyed operator subtask, so
	// that state can outgrow memory; each access encodes or decodes through
	// the state's codecs. See docs/state.md.
	PebbleBackend
)

// String returns "heap" or "pebble".
func (k BackendKind) String() string {
	switch k {
	case HeapBackend:
		return "heap"
	case PebbleBackend:
		return "pebble"
	}
	return fmt.Sprintf("BackendKind(%d)", uint8(k))
}

// BackendConfig chooses where the keyed state of a job's keyed operators
// lives. The zero value is the heap backend. Checkpoints are the same
// whichever the backend: a checkpoint taken with one restores into the
// other.
type BackendConfig struct {
	// Kind is HeapBackend (the default) or PebbleBackend.
	Kind BackendKind
	// Dir is the directory in which PebbleBackend keeps the database of
	// each keyed operator subtask, in Dir/<operator>-<subtask>.<instance>
	// (the operator's name path-escaped, the instance a random id of each
	// opening) with a lock file beside it. Required for PebbleBackend;
	// give every job its own. A subtask opens a fresh database (its state
	// is restored from the checkpoint), removes it when it closes, and
	// removes those that killed processes left behind, never one that a
	// live process holds: a zombie of the job that shares Dir with its
	// successor cannot touch the successor's database. The heap backend
	// writes a checkpoint's snapshot larger than HeapInlineBytes to a
	// temporary file there (in the system's temporary directory when Dir
	// is empty), removed at once, while it uploads it.
	Dir string
	// MemoryBudget is the memory, in bytes, that the Pebble backend uses
	// for caches in each keyed operator subtask: half for the database's
	// block cache (bloom filters, indexes and data blocks of its files),
	// half for the write-back caches of its value states, counted in the
	// bytes of the values' encodings (see docs/state.md, Tuning). 0 means
	// DefaultMemoryBudget; at least MinMemoryBudget otherwise. The block
	// cache lives outside the Go heap (Pebble allocates it with C's
	// malloc), so GOMEMLIMIT does not see it: a process with n keyed
	// subtasks on Pebble uses about n × MemoryBudget besides its Go heap's
	// other contents. The heap backend ignores it.
	MemoryBudget int64
	// Memory, when set, is a budget the Pebble backends opened with this
	// configuration share, for the whole process: one block cache, the
	// write buffers of every database and the value caches all count
	// against it (see Memory), and MemoryBudget is not used. Give one
	// Memory to every job of a process whose memory is bounded.
	Memory *Memory
	// DownloadConcurrency is the number of shared files of an incremental
	// checkpoint that a subtask's restore downloads at a time, each
	// verified by its checksum. 0 means DefaultDownloadConcurrency (8).
	// Raise it when the object store's latency, not its bandwidth, bounds
	// a restore; lower it to 1 to download one file at a time. Both
	// backends restore incremental checkpoints, so both use it.
	DownloadConcurrency int
	// HeapInlineBytes is the size under which a heap backend subtask's
	// full checkpoint snapshot stays in the checkpoint's state file rather
	// than starting an incremental chain of shared files (see
	// docs/state.md, Incremental checkpoints of the heap backend): a small
	// state costs less written whole than as a file of its own. 0 means
	// DefaultHeapInlineBytes; a negative value starts a chain at any size.
	// The Pebble backend ignores it.
	HeapInlineBytes int
}

// DefaultHeapInlineBytes is BackendConfig.HeapInlineBytes when it is 0.
const DefaultHeapInlineBytes = 256 << 10

// DefaultMemoryBudget is the Pebble backend's memory budget per keyed
// operator subtask when BackendConfig.MemoryBudget is 0: 256 MiB.
const DefaultMemoryBudget = 256 << 20

// MinMemoryBudget is the smallest BackendConfig.MemoryBudget: 4 MiB.
const MinMemoryBudget = 4 << 20

// budget returns the memory budget with the default filled in.
func (c BackendConfig) budget() int64 {
	if c.MemoryBudget == 0 {
		return DefaultMemoryBudget
	}
	return c.MemoryBudget
}

// Validate checks the configuration; its errors name the field and the fix.
func (c BackendConfig) Validate() error {
	if c.DownloadConcurrency < 0 {
		return fmt.Errorf("state: BackendConfig.DownloadConcurrency %d is negative: set it to 0 for the default of %d downloads at a time, or to a positive number", c.DownloadConcurrency, DefaultDownloadConcurrency)
	}
	switch c.Kind {
	case HeapBackend:
		return nil
	case PebbleBackend:
		if c.Dir == "" {
			return fmt.Errorf("state: BackendConfig.Dir is empty: the Pebble backend needs a directory for its databases: set Dir to a directory of this job's own")
		}
		if c.MemoryBudget != 0 && c.Memory != nil {
			return fmt.Errorf("state: BackendConfig.MemoryBudget %d and BackendConfig.Memory are both set: Memory, the process's shared budget, replaces the budget of each subtask: set only one", c.MemoryBudget)
		}
		if c.MemoryBudget != 0 && c.MemoryBudget < MinMemoryBudget {
			return fmt.Errorf("state: BackendConfig.MemoryBudget %d is below the minimum of %d bytes (4 MiB): set it to at least MinMemoryBudget, or 0 for the default of 256 MiB", c.MemoryBudget, MinMemoryBudget)
		}
		return nil
	}
	return fmt.Errorf("state: BackendConfig.Kind %v is unknown: use HeapBackend or PebbleBackend", c.Kind)
}

// OpenKeyedBackend returns an empty backend, of the kind c chooses, for
// subtask subtask of the keyed operator called operator, which owns the key
// groups owned of a job with maxParallelism key groups. Unlike
// NewKeyedBackend it reports bad arguments as errors. Close the backend
// when done with it.
func OpenKeyedBackend[K comparable](c BackendConfig, operator string, subtask int,
	keyCodec Codec[K], maxParallelism int, owned KeyGroupRange) (*KeyedBackend[K], error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if err := checkOwned(maxParallelism, owned); err != nil {
		return nil, err
	}
	b := newHeapBackend(keyCodec, maxParallelism, owned)
	b.downloads = c.DownloadConcurrency
	b.inlineBelow = c.HeapInlineBytes
	b.spillDir = c.Dir
	if c.Kind == HeapBackend {
		return b, nil
	}
	dir := filepath.Join(c.Dir, url.PathEscape(operator)+"-"+strconv.Itoa(subtask))
	opts := kv.Options{CacheBytes: c.budget() / 2}
	values := valueCache{limit: c.budget() - c.budget()/2}
	if c.Memory != nil {
		opts.Cache, values.shared = c.Memory.acquire(), c.Memory
	}
	db, err := kv.Open(dir, opts)
	if err != nil {
		if c.Memory != nil {
			c.Memory.release()
		}
		return nil, fmt.Errorf("state: operator %q subtask %d: %w: check BackendConfig.Dir %q", operator, subtask, err, c.Dir)
	}
	b.disk = newDiskStore(db, b, values)
	b.useDiskTimers()
	return b, nil
}
