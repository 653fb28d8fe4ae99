package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/internal/vfs"
	"github.com/exactlyonce/exactly/state/internal/kv"
)

func TestBackendConfigValidate(t *testing.T) {
	for _, c := range []struct {
		config BackendConfig
		want   string // "" for valid
	}{
		{BackendConfig{}, ""},
		{BackendConfig{Kind: PebbleBackend, Dir: "/x"}, ""},
		{BackendConfig{Kind: PebbleBackend}, "BackendConfig.Dir is empty"},
		{BackendConfig{Kind: 7}, "BackendConfig.Kind BackendKind(7) is unknown"},
		{BackendConfig{Kind: PebbleBackend, Dir: "/x", MemoryBudget: MinMemoryBudget}, ""},
		{BackendConfig{Kind: PebbleBackend, Dir: "/x", MemoryBudget: 1000}, "BackendConfig.MemoryBudget 1000 is below the minimum"},
		{BackendConfig{Kind: PebbleBackend, Dir: "/x", MemoryBudget: -1}, "BackendConfig.MemoryBudget -1 is below the minimum"},
		{BackendConfig{DownloadConcurrency: 16}, ""},
		{BackendConfig{Kind: PebbleBackend, Dir: "/x", DownloadConcurrency: -2}, "BackendConfig.DownloadConcurrency -2 is negative"},
	} {
		err := c.config.Validate()
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%+v: Validate() = %v, want %q", c.config, err, c.want)
		}
	}
	if _, err := OpenKeyedBackend(BackendConfig{Kind: PebbleBackend}, "op", 0, StringCodec{}, 8, KeyGroupRange{0, 8}); err == nil {
		t.Error("OpenKeyedBackend without a directory succeeded")
	}
	if _, err := OpenKeyedBackend(BackendConfig{}, "op", 0, StringCodec{}, 8, KeyGroupRange{0, 9}); err == nil {
		t.Error("OpenKeyedBackend with a range beyond max parallelism succeeded")
	}
}

// TestPebbleDirectory: a subtask's database is a fresh directory of its
// own, Dir/<operator>-<subtask>.<instance>, removed with its lock file
// when closed. Opening removes what a killed process left behind, never
// the database of a live one (a zombie's, or its successor's).
func TestPebbleDirectory(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "sum%2Fby-key-3")
	abandoned, live := base+".0123456789abcdef", base+".fedcba9876543210"
	for _, d := range []string{abandoned, abandoned + ".checkpoint-4", live} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "left-over"), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(abandoned+".lock", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	held, err := vfs.Default.TryLock(live + ".lock")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()

	b, err := OpenKeyedBackend(BackendConfig{Kind: PebbleBackend, Dir: dir}, "sum/by-key", 3, StringCodec{}, 8, KeyGroupRange{0, 8})
	if err != nil {
		t.Fatal(err)
	}
	own := b.disk.db.Dir()
	if !strings.HasPrefix(own, base+".") || own == live {
		t.Fatalf("the database is in %s, want a new directory %s.<instance>", own, base)
	}
	for _, gone := range []string{abandoned, abandoned + ".checkpoint-4", abandoned + ".lock"} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("open left the abandoned %s: %v", filepath.Base(gone), err)
		}
	}
	if _, err := os.Stat(filepath.Join(live, "left-over")); err != nil {
		t.Errorf("open touched the database of a live process: %v", err)
	}
	s := must(NewValueState[string, int](b.Scope(), "n", IntCodec{}))
	b.SetCurrentKey("a")
	s.Update(1)
	encode := b.Snapshot()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, gone := range []string{own, own + ".lock"} {
		if _, err := os.Stat(gone); !os.IsNotExist(err) {
			t.Errorf("Close left %s: %v", filepath.Base(gone), err)
		}
	}
	if _, err := os.Stat(filepath.Join(live, "left-over")); err != nil {
		t.Errorf("Close touched the database of a live process: %v", err)
	}
	if _, err := encode(); !errors.Is(err, kv.ErrViewReleased) {
		t.Errorf("encoding after Close: %v, want ErrViewReleased", err)
	}
}

func TestPebbleSnapshotEncodesOnce(t *testing.T) {
	b := newBackend(t, PebbleBackend, StringCodec{}, 8, KeyGroupRange{0, 8})
	encode := b.Snapshot()
	if _, err := encode(); err != nil {
		t.Fatal(err)
	}
	if _, err := encode(); !errors.Is(err, kv.ErrViewReleased) {
		t.Errorf("second encoding: %v, want ErrViewReleased", err)
	}
}

// TestPebbleTwoInstancesShareDir: two openings of one subtask's database
// on the same Dir — a zombie and the successor that took its work over,
// running the same job on one machine — keep apart: the second leaves the
// first's database alone, and the first's Close leaves the second's, which
// still writes and checkpoints. (Before instance directories, the
// successor wiped the zombie's database, and the zombie's Close removed
// the successor's, whose flushes then failed and stalled its writes.)
func TestPebbleTwoInstancesShareDir(t *testing.T) {
	c := BackendConfig{Kind: PebbleBackend, Dir: t.TempDir()}
	open := func() (*KeyedBackend[string], *ValueState[string, int]) {
		b, err := OpenKeyedBackend(c, "sum", 0, StringCodec{}, 8, KeyGroupRange{0, 8})
		if err != nil {
			t.Fatal(err)
		}
		return b, must(NewValueState[string, int](b.Scope(), "n", IntCodec{}))
	}
	zombie, zs := open()
	zombie.SetCurrentKey("a")
	zs.Update(1)
	successor, ss := open()
	zombie.SetCurrentKey("b")
	zs.Update(2)
	if _, err := zombie.Snapshot()(); err != nil {
		t.Fatalf("the zombie's snapshot after the successor opened: %v", err)
	}
	if err := zombie.Close(); err != nil {
		t.Fatal(err)
	}
	successor.SetCurrentKey("a")
	ss.Update(3)
	if _, err := successor.Snapshot()(); err != nil {
		t.Fatalf("the successor's snapshot after the zombie closed: %v", err)
	}
	if v, ok := ss.Value(); !ok || v != 3 {
		t.Errorf("the successor reads a = %v, %v, want 3", v, ok)
	}
	if err := successor.Close(); err != nil {
		t.Fatal(err)
	}
}
