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
// malloc_trim returns the arenas' free pages every second: 85 MiB outside
// the Go heap in the same run, a peak RSS of 345 MiB.
// (MALLOC_ARENA_MAX=2 in the environment held 90 MiB; set from the
// program, even at its start, it came after the Go runtime's first
// threads had made arenas of their own, and held 123 MiB.)
//
// A trim costs its call (about 80 ms each in a CPU profile of the run
// below) and the faults of the pages it returned when they are used
// again. With a database under a shared state.Memory open (one given
// Options.Cache), whose peak RSS the budget bounds, the trimmer trims
// every boundedTrimInterval; with only databases of per-subtask budgets,
// every trimInterval (state-bench, 1 GiB of state at the default budget,
// three alternating pairs: 67.2-69.6 k events/s trimming every second,
// 75.3-83.3 k every 10 seconds, peak RSS 1.00-1.22 GiB against
// 1.20-1.28 GiB; under a 256 MiB Memory at 2 GiB of state, one run each:
// 25.7 k events/s and 349 MiB every second, 25.1 k and 361 MiB every 10).
const (
	boundedTrimInterval = time.Second
	trimInterval        = 10 * time.Second
)

// trimmer calls trim while a database is open: every boundedTrimInterval
// while one of them is bounded (under a shared state.Memory), every
// trimInterval otherwise.
type trimmer struct {
	trim    func()
	mu      sync.Mutex
	open    int // databases open
	bounded int // of which bounded
	stop    chan struct{}
}

// mallocTrimmer returns the free memory of C's malloc to the system for
// the process's databases.
var mallocTrimmer = &trimmer{trim: mallocTrim}

// acquire counts a database opening, bounded or not, and starts trimming
// with the first.
func (t *trimmer) acquire(bounded bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open++
	if bounded {
		t.bounded++
	}
	if t.open == 1 {
		t.stop = make(chan struct{})
		go t.run(t.stop)
	}
}

// release counts a database closing, and stops trimming with the last.
func (t *trimmer) release(bounded bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.open--
	if bounded {
		t.bounded--
	}
	if t.open == 0 {
		close(t.stop)
	}
}

// interval returns the time until the next trim.
func (t *trimmer) interval() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.bounded > 0 {
		return boundedTrimInterval
	}
	return trimInterval
}

func (t *trimmer) run(stop <-chan struct{}) {
	for {
		next := time.NewTimer(t.interval())
		select {
		case <-stop:
			next.Stop()
			return
		case <-next.C:
			t.trim()
		}
	}
}
