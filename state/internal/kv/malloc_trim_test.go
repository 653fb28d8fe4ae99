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

// TestTrimmerRunsWhileADatabaseIsOpen checks that the trimmer trims every
// trimInterval from the first acquire to the last release, and not after.
func TestTrimmerRunsWhileADatabaseIsOpen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var trims atomic.Int64
		tr := &trimmer{trim: func() { trims.Add(1) }}
		tr.acquire()
		tr.acquire()
		time.Sleep(3*trimInterval + trimInterval/2)
		synctest.Wait()
		if n := trims.Load(); n != 3 {
			t.Fatalf("%d trims in 3.5 intervals with two databases open, want 3", n)
		}
		tr.release()
		time.Sleep(trimInterval)
		synctest.Wait()
		if n := trims.Load(); n != 4 {
			t.Fatalf("%d trims after another interval with one database open, want 4", n)
		}
		tr.release()
		time.Sleep(5 * trimInterval)
		synctest.Wait()
		if n := trims.Load(); n != 4 {
			t.Fatalf("%d trims after the last database closed, want still 4", n)
		}
		// A database opened again starts it again.
		tr.acquire()
		time.Sleep(trimInterval)
		synctest.Wait()
		tr.release()
		if n := trims.Load(); n != 5 {
			t.Fatalf("%d trims after a database opened again for an interval, want 5", n)
		}
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
