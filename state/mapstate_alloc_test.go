package state

import (
	"testing"
	"time"
)

// TestMapStateComputeDoesNotAllocate: Compute with a closure that captures
// the caller's variables, on an entry that exists, allocates nothing, on
// each backend and with a TTL. When Compute handed the closure to its
// store through the store interface, the closure escaped to the heap: one
// allocation per call, which cost Nexmark q5 (its windows' panes) 30% of
// its events per CPU-second (issue 31, bisected to 767c39d).
func TestMapStateComputeDoesNotAllocate(t *testing.T) {
	for _, c := range []struct {
		name string
		kind BackendKind
		opts []Option
	}{
		{"heap", HeapBackend, nil},
		{"heap-ttl", HeapBackend, []Option{WithTTL(TTL{After: time.Hour})}},
		{"pebble", PebbleBackend, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := newBackend[int64](t, c.kind, Int64Codec{}, 8, KeyGroupRange{0, 8})
			m, err := NewMapState[int64, int64, int64](b.Scope(), "m", Int64Codec{}, Int64Codec{}, c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			b.SetCurrentKey(1)
			m.Put(7, 0)
			add, seen := int64(3), 0
			allocs := testing.AllocsPerRun(100, func() {
				m.Compute(7, func(old int64, ok bool) int64 {
					if ok {
						seen++
					}
					return old + add
				})
			})
			if c.kind == HeapBackend && allocs != 0 {
				t.Errorf("Compute allocated %v times per call; want 0 (does its closure escape to the heap?)", allocs)
			}
			t.Logf("%s: %v allocations per Compute", c.name, allocs)
		})
	}
}
