package state

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

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

// TestPebbleDirectory: a subtask's database is Dir/<operator>-<subtask>,
// wiped when opened and removed when closed.
func TestPebbleDirectory(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "sum%2Fby-key-3")
	if err := os.MkdirAll(db, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(db, "left-over"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := OpenKeyedBackend(BackendConfig{Kind: PebbleBackend, Dir: dir}, "sum/by-key", 3, StringCodec{}, 8, KeyGroupRange{0, 8})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(db, "left-over")); !os.IsNotExist(err) {
		t.Errorf("open left the old contents: %v", err)
	}
	s := must(NewValueState[string, int](b.Scope(), "n", IntCodec{}))
	b.SetCurrentKey("a")
	s.Update(1)
	encode := b.Snapshot()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Errorf("Close left the database directory: %v", err)
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
