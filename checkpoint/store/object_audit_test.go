package store

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
)

// TestObjectStoreUnreferenced: what a crashed checkpoint and an upload no
// checkpoint refers to leave behind is listed, and a completion's sweep
// removes it, after which nothing is listed.
func TestObjectStoreUnreferenced(t *testing.T) {
	objectBackends(t, func(t *testing.T, f objectFixture) {
		s := f.open(t, Options{})
		acquireObject(t, s, realOwnership("a", time.Hour))
		writeCheckpoint(t, s, checkpoint.KindCheckpoint)
		s.sweeps.Wait()
		if got, err := s.Unreferenced(); err != nil || len(got) != 0 {
			t.Fatalf("after one checkpoint: Unreferenced = %v, %v; want none", got, err)
		}
		// A checkpoint that crashed after writing a state file and a
		// shared file.
		id, err := s.ReserveAbove(0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.WriteState(id, checkpoint.KindCheckpoint, "Sink", 0, snapshotFor(id, "Sink", 0)); err != nil {
			t.Fatal(err)
		}
		sf, err := writeSharedBytes(s, id, "inst-000001.sst", []byte("table"))
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Unreferenced()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || !slices.ContainsFunc(got, func(u string) bool { return strings.HasSuffix(u, "/shared/"+sf.Name) }) ||
			!slices.ContainsFunc(got, func(u string) bool { return strings.Contains(u, "/"+dirName(id, checkpoint.KindCheckpoint)+"/") }) {
			t.Fatalf("after a crashed checkpoint: Unreferenced = %v; want its state file and its shared file", got)
		}
		writeCheckpoint(t, s, checkpoint.KindCheckpoint)
		s.sweeps.Wait()
		if got, err := s.Unreferenced(); err != nil || len(got) != 0 {
			t.Fatalf("after the next completion's sweep: Unreferenced = %v, %v; want none", got, err)
		}
	})
}
