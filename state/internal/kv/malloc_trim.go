package kv

import (
	"sync"
	"time"
)

// Pebble allocates its block cache and memtables with C's malloc (when
// built with cgo). glibc keeps what is freed in its arenas, one per thread
// that contended for one, up to 8 per core, and returns to the system only
// the free memory at the top of each: with the block cache's 4 KiB blocks
// allocated and freed from every thread of the Go runtime, the arenas held
// about 50 MiB beyond what Pebble used (state-bench, 2 GiB of state under
// a 256 MiB state.Memory: 138 MiB outside the Go heap for 80 MiB of block
// cache and memtables, a peak RSS of 405 MiB). While a database is open,
// malloc_trim returns the arenas' free pages every trimInterval: 85 MiB
// outside the Go heap in the same run, a peak RSS of 345 MiB.
// (MALLOC_ARENA_MAX=2 in the environment held 90 MiB; set from the
// program, even at its start, it came after the Go runtime's first
// threads had made arenas of their own, and held 123 MiB.)
const trimInterval = time.Second

// trimmer calls trim every trimInterval while a database is open.
type trimmer struct {
	trim func()
	mu   sync.Mutex
	open int
	stop chan struct{}
}

// mallocTrimmer returns the free memory of C's malloc to the system for
// the process's databases.
var mallocTrimmer = &trimmer{trim: mallocTrim}

// acquire counts a database opening, and starts trimming with the first.
func (t *trimmer) acquire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open++
	if t.open == 1 {
		t.stop = make(chan struct{})
		go t.run(t.stop)
	}
}

// release counts a database closing, and stops trimming with the last.
func (t *trimmer) release() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open--
	if t.open == 0 {
		close(t.stop)
	}
}

func (t *trimmer) run(stop <-chan struct{}) {
	tick := time.NewTicker(trimInterval)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			t.trim()
		}
	}
}
