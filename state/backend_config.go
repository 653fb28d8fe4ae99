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
	// PebbleBackend keeps Value, Map and List state on disk, in one Pebble
	// database per keyed operator subtask, so that state can outgrow memory;
	// each access encodes or decodes through the state's codecs. Timers stay
	// in memory. See docs/state.md.
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
	// each keyed operator subtask, in Dir/<operator>-<subtask> (the
	// operator's name path-escaped). Required for PebbleBackend; give
	// every job its own. A subtask wipes its database directory when it
	// opens (state is restored from the checkpoint) and removes it when it
	// closes.
	Dir string
}

// Validate checks the configuration; its errors name the field and the fix.
func (c BackendConfig) Validate() error {
	switch c.Kind {
	case HeapBackend:
		return nil
	case PebbleBackend:
		if c.Dir == "" {
			return fmt.Errorf("state: BackendConfig.Dir is empty: the Pebble backend needs a directory for its databases: set Dir to a directory of this job's own")
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
	if c.Kind == HeapBackend {
		return b, nil
	}
	dir := filepath.Join(c.Dir, url.PathEscape(operator)+"-"+strconv.Itoa(subtask))
	db, err := kv.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("state: operator %q subtask %d: %w: check BackendConfig.Dir %q", operator, subtask, err, c.Dir)
	}
	b.disk = newDiskStore(db, b)
	return b, nil
}
