package state

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

// Memory is a budget of bytes that the Pebble backends of a process share:
// set BackendConfig.Memory to one Memory and every keyed operator subtask
// opened with that configuration (every subtask of a job, and in a cluster
// instance every task's) takes its memory from it, instead of a
// MemoryBudget of its own. The budget holds, counted in bytes:
//
//   - one block cache, shared by the databases (a quarter of the budget);
//   - each open database's write buffers: MemTableStopWritesThreshold
//     memtables of kv.MemTableBytes (8 MiB per database);
//   - the write-back caches of the value states (the rest, at least an
//     eighth of the budget), of which each open database has an even
//     share: a subtask whose caches used it up empties them, writing
//     their changes back, at its next miss.
//
// Timers on disk keep only each key group's earliest timer in memory, and
// an upload streams its file through one part buffer of the checkpoint
// storage (8 MiB on S3); neither is counted. The block cache and the
// memtables live outside the Go heap, the value caches in it: see
// GoHeapBytes for GOMEMLIMIT. A Memory is safe for concurrent use.
type Memory struct {
	budget int64

	mu    sync.Mutex
	cache *pebble.Cache // the shared block cache while a database is open
	// open counts the databases open: changed under mu, read without it
	// by the value caches.
	open atomic.Int64
}

// NewMemory returns a budget of bytes for the Pebble backends of a process.
// It fails below MinMemoryBudget.
func NewMemory(bytes int64) (*Memory, error) {
	if bytes < MinMemoryBudget {
		return nil, fmt.Errorf("state: memory budget %d is below the minimum of %d bytes (4 MiB): give NewMemory at least MinMemoryBudget", bytes, MinMemoryBudget)
	}
	return &Memory{budget: bytes}, nil
}

// Bytes returns the budget.
func (m *Memory) Bytes() int64 { return m.budget }

// blockCacheBytes is the shared block cache's size.
func (m *Memory) blockCacheBytes() int64 { return max(m.budget/4, kv.MinCacheBytes) }

// GoHeapBytes returns the part of the budget that lives in the Go heap (the
// value caches', at most): the rest, the block cache and the memtables,
// Pebble allocates outside it. A process whose memory limit is L and whose
// backends share m sets GOMEMLIMIT (or debug.SetMemoryLimit) to about
// L - (m.Bytes() - m.GoHeapBytes()), so that the Go heap, the value
// caches included, stays within what the rest leaves.
func (m *Memory) GoHeapBytes() int64 {
	return m.budget - m.blockCacheBytes() - int64(m.open.Load())*kv.WriteBufferBytes
}

// valueLimit returns what the value caches of all the databases may use:
// the budget less the block cache and the write buffers of the open
// databases, and at least an eighth of the budget.
func (m *Memory) valueLimit() int64 {
	return max(m.GoHeapBytes(), m.budget/8)
}

// acquire counts a database opening and returns the shared block cache,
// which the database refers to until it closes; release it with release.
func (m *Memory) acquire() *pebble.Cache {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cache == nil {
		m.cache = pebble.NewCache(m.blockCacheBytes())
	}
	m.open.Add(1)
	return m.cache
}

// release counts a database closed; the last one frees the block cache.
func (m *Memory) release() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.open.Add(-1) == 0 && m.cache != nil {
		m.cache.Unref()
		m.cache = nil
	}
}

// valueCache is the memory the write-back caches of a subtask's value
// states use, and may use: the cost of their entries (see
// cachedValue.cost), against their share of BackendConfig.MemoryBudget, or
// of the shared Memory.
type valueCache struct {
	used   int64
	limit  int64   // without shared
	shared *Memory // nil: the subtask's own budget, limit
}

// full reports whether the caches used up their budget: the next miss
// empties them all. With a shared Memory, that is when they reached their
// even share of its limit for the value caches of all the open databases.
func (c *valueCache) full() bool {
	if c.shared == nil {
		return c.used >= c.limit
	}
	return c.used >= c.shared.valueLimit()/max(c.shared.open.Load(), 1)
}
