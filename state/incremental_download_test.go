package state

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// gatedShared is a checkpoint.SharedFiles whose reads each wait for a
// release, so that a test sees how many are in flight at once. A read of
// the file named fail writes half of it and fails.
type gatedShared struct {
	*memShared
	release chan struct{}
	started chan struct{} // a send per read started
	fail    string

	mu            sync.Mutex
	inFlight, max int
}

var errInjected = errors.New("injected download failure")

func newGatedShared(m *memShared) *gatedShared {
	return &gatedShared{memShared: m, release: make(chan struct{}), started: make(chan struct{}, 1024)}
}

func (g *gatedShared) ReadShared(f checkpoint.SharedFile, w io.Writer) error {
	g.mu.Lock()
	g.inFlight++
	g.max = max(g.max, g.inFlight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inFlight--
		g.mu.Unlock()
	}()
	g.started <- struct{}{}
	<-g.release
	if f.Name == g.fail {
		b, err := g.read(f)
		if err == nil {
			_, err = w.Write(b[:len(b)/2])
		}
		return errors.Join(errInjected, err)
	}
	return g.memShared.ReadShared(f, w)
}

func (g *gatedShared) peak() (inFlight, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.max
}

// sharedFileSet puts n small shared files into m and returns them as a
// database's files.
func sharedFileSet(t *testing.T, m *memShared, n int) []checkpoint.DBFile {
	t.Helper()
	var files []checkpoint.DBFile
	for i := range n {
		data := fmt.Appendf(nil, "contents of file %d", i)
		f, err := m.WriteShared(1, fmt.Sprintf("file-%d", i), bytes.NewReader(data), int64(len(data)))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, checkpoint.DBFile{Name: fmt.Sprintf("%06d.sst", i), Shared: f})
	}
	return files
}

// TestDownloadConcurrencyBounded: a restore downloads its shared files
// with exactly the configured number in flight: the first limit reads all
// start before any is released, and no read ever starts while limit are in
// flight. Every file arrives whole.
func TestDownloadConcurrencyBounded(t *testing.T) {
	const n, limit = 12, 3
	g := newGatedShared(newMemShared())
	files := sharedFileSet(t, g.memShared, n)
	dir := t.TempDir()
	done := make(chan error, 1)
	go func() { done <- download(dir, files, g, nil, limit) }()
	describe := func() string { in, most := g.peak(); return fmt.Sprintf("%d in flight, at most %d", in, most) }
	waitStarted := func(started int) {
		t.Helper()
		// A guard against a hang, not a timing assertion.
		guard := time.NewTimer(time.Minute)
		defer guard.Stop()
		select {
		case <-g.started:
		case <-guard.C:
			t.Fatalf("waited a minute for download %d to start: %s", started, describe())
		}
	}
	for started := 1; started < limit; started++ {
		waitStarted(started)
	}
	for started := limit; started <= n; started++ {
		waitStarted(started)
		if _, most := g.peak(); most > limit {
			t.Fatalf("%d downloads in flight at once, limit %d", most, limit)
		}
		g.release <- struct{}{}
	}
	for range limit - 1 {
		g.release <- struct{}{}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, most := g.peak(); most != limit {
		t.Errorf("at most %d downloads in flight, want %d", most, limit)
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(got)) != f.Shared.Size || format.Checksum(got) != f.Shared.CRC32C {
			t.Errorf("%s: %d bytes with another checksum than the %d recorded", f.Name, len(got), f.Shared.Size)
		}
	}
}

// TestDownloadFailureFailsRestore: one shared file whose download fails
// (half written) fails the Pebble backend's restore with that error, after
// the downloads in flight finished; the backend adopts nothing, holds no
// state, and no download directory is left.
func TestDownloadFailureFailsRestore(t *testing.T) {
	const maxP = 16
	src := subtaskFixture(t, PebbleBackend, 0, 1, maxP)
	for i := range 3000 {
		src.b.SetCurrentKey(fmt.Sprint("key-", i))
		src.count.Update(int64(i))
	}
	m := newMemShared()
	var snap checkpoint.SubtaskSnapshot
	// A few checkpoints, so that the database has a few files.
	for id := checkpoint.ID(1); id <= 4; id++ {
		src.b.SetCurrentKey(fmt.Sprint("more-", id))
		src.count.Update(int64(id))
		snap = incrementalNow(t, src, id, m)
		src.b.CheckpointComplete(id)
	}
	var shared []string
	for _, f := range snap.DBs[0].Files {
		if f.Shared.Name != "" {
			shared = append(shared, f.Shared.Name)
		}
	}
	if len(shared) < 2 {
		t.Fatalf("the snapshot has %d shared files, want at least 2", len(shared))
	}
	g := newGatedShared(m)
	g.fail = shared[len(shared)/2]
	close(g.release) // no gate: every read goes on at once
	stateDir := t.TempDir()
	to := pebbleFixtureIn(t, stateDir, maxP)
	to.b.downloads = 2
	err := to.b.RestoreDBs(snap.DBs, g)
	if !errors.Is(err, errInjected) {
		t.Fatalf("RestoreDBs = %v, want the injected failure", err)
	}
	if in, _ := g.peak(); in != 0 {
		t.Errorf("RestoreDBs returned with %d downloads in flight", in)
	}
	if got := to.dump("key-1"); !got.empty() {
		t.Errorf("after the failed restore key-1 = %v, want nothing", got)
	}
	entries, err := os.ReadDir(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	own := filepath.Base(to.b.disk.db.Dir())
	kept := map[string]bool{own: true, own + ".lock": true, filepath.Base(to.b.disk.local.Dir()): true}
	for _, e := range entries {
		if !kept[e.Name()] {
			t.Errorf("the failed restore left %s in the state directory", e.Name())
		}
	}
}
