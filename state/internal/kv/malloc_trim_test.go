package kv

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestTrimmerRunsWhileADatabaseIsOpen checks that the trimmer trims from
// the first acquire to the last release, and not after: every
// trimInterval with databases of their own budgets open, every
// boundedTrimInterval while a bounded one is open too.
func TestTrimmerRunsWhileADatabaseIsOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var trims atomic.Int64
		want := func(n int64, what string) {
			t.Helper()
			synctest.Wait()
			if got := trims.Load(); got != n {
				t.Fatalf("%d trims %s, want %d", got, what, n)
			}
		}
		tr := &trimmer{trim: func() { trims.Add(1) }}
		tr.acquire(false)
		tr.acquire(false)
		time.Sleep(3*trimInterval + trimInterval/2)
		want(3, "in 3.5 intervals with two databases open")
		// A bounded database: after the trim due, every bounded interval.
		tr.acquire(true)
		time.Sleep(trimInterval / 2)
		want(4, "at the interval due")
		time.Sleep(3 * boundedTrimInterval)
		want(7, "in 3 bounded intervals with a bounded database open")
		tr.release(true)
		tr.release(false)
		time.Sleep(boundedTrimInterval + trimInterval)
		want(9, "after the bounded one closed: the bounded interval due, then one interval")
		tr.release(false)
		time.Sleep(5 * trimInterval)
		want(9, "after the last database closed")
		// A database opened again starts it again.
		tr.acquire(true)
		time.Sleep(boundedTrimInterval)
		want(10, "after a database opened again for an interval")
		tr.release(true)
	})
}

// TestMallocTrimReturnsFreedMemory checks that mallocTrim returns to the
// system the memory that free keeps: 64 MiB of 4 KiB blocks freed below a
// block still held.
func TestMallocTrimReturnsFreedMemory(t *testing.T) {
	if !mallocTrimSupported() {
		t.Skip("malloc_trim needs cgo and glibc")
	}
	const blocks, size = 16384, 4096 // 64 MiB
	free := mallocFragment(blocks, size)
	defer free()
	held := rssAnon(t)
	mallocTrim()
	trimmed := rssAnon(t)
	if held-trimmed < blocks*size/2 {
		t.Fatalf("anonymous RSS %d bytes with 64 MiB freed and held by malloc, %d after the trim: want at least 32 MiB less", held, trimmed)
	}
}

// rssAnon returns the process's anonymous resident memory, in bytes.
func rssAnon(t *testing.T) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status: %v", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Skip("no RssAnon in /proc/self/status")
	return 0
}
