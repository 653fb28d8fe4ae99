package format_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/checkpoint/store"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/state"
)

// The fixtures in testdata were written by the previous release (see
// testdata/README.md). These are the values it wrote.
const (
	fixtureIncarnation = "5bcc95a3193bb87433cce477ab334241"
	fixtureChk         = "chk-00000000000000000001"
	fixtureMaxPar      = 128
)

var fixtureNow = time.Date(2025, 1, 2, 3, 4, 5, 600, time.UTC)

// fixtureKeys are the keys of each subtask of operator "count", in the
// order the generator wrote them.
var fixtureKeys = [][]string{{"carol", "frank", "heidi"}, {"alice", "bob", "dave", "erin", "grace"}}

// copyFixture copies testdata/name to a temporary directory: opening a
// store creates files.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", name))); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readFixture(t *testing.T, path ...string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(append([]string{"testdata"}, path...)...))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestCompatStoreFiles decodes the previous release's _ids, _owner and
// _incarnation and encodes them back to the same bytes.
func TestCompatStoreFiles(t *testing.T) {
	ids := readFixture(t, "job", "_ids")
	reserved, completed, err := format.DecodeIDs("_ids", ids)
	if err != nil || reserved != 1 || completed != 1 {
		t.Fatalf("_ids = %d, %d, %v; want 1, 1", reserved, completed, err)
	}
	if again := format.EncodeIDs(reserved, completed); !bytes.Equal(again, ids) {
		t.Errorf("_ids encodes back as %x, want %x", again, ids)
	}

	owner := readFixture(t, "job", "_owner")
	r, err := format.DecodeOwner("_owner", owner)
	want := format.OwnerRecord{Epoch: 1, Holder: "fixture generator", Renewed: fixtureNow.UnixNano(), LeaseNS: int64(10 * time.Second)}
	if err != nil || r != want {
		t.Fatalf("_owner = %+v, %v; want %+v", r, err, want)
	}
	if again, err := format.EncodeOwner(r); err != nil || !bytes.Equal(again, owner) {
		t.Errorf("_owner encodes back as %q, %v; want %q", again, err, owner)
	}

	inc := readFixture(t, "job", "_incarnation")
	id, err := format.DecodeIncarnation("_incarnation", inc)
	if err != nil || id != fixtureIncarnation {
		t.Fatalf("_incarnation = %q, %v; want %q", id, err, fixtureIncarnation)
	}
	if again := format.EncodeIncarnation(id); !bytes.Equal(again, inc) {
		t.Errorf("_incarnation encodes back as %x, want %x", again, inc)
	}
}

// TestCompatCheckpoint restores the previous release's checkpoint with this
// build's store and decoders, checks every decoded value, and encodes each
// value back to the fixture's bytes.
func TestCompatCheckpoint(t *testing.T) {
	dir := copyFixture(t, "job")
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Latest()
	if err != nil || m == nil {
		t.Fatalf("Latest = %v, %v", m, err)
	}
	handle := func(sub, start, end int, file string, crc uint32) checkpoint.StateHandle {
		fi, err := os.Stat(filepath.Join("testdata", "job", fixtureChk, file))
		if err != nil {
			t.Fatal(err)
		}
		return checkpoint.StateHandle{Subtask: sub, KeyGroupStart: start, KeyGroupEnd: end, File: file, Size: fi.Size(), CRC32C: crc}
	}
	want := checkpoint.Metadata{
		FormatVersion: 1, ID: 1, Kind: checkpoint.KindCheckpoint, Job: "fixture-job",
		Incarnation: fixtureIncarnation, Epoch: 1, MaxParallelism: fixtureMaxPar,
		Triggered: fixtureNow, Completed: fixtureNow.Add(1500 * time.Millisecond),
		Operators: []checkpoint.OperatorState{
			{Name: "count", Parallelism: 2, Subtasks: []checkpoint.StateHandle{
				handle(0, 0, 64, "count-0.state", 113369277), handle(1, 64, 128, "count-1.state", 3334104314)}},
			{Name: "sink", Parallelism: 1, Subtasks: []checkpoint.StateHandle{handle(0, 0, 0, "sink-0.state", 3723149660)}},
			{Name: "source", Parallelism: 1, Subtasks: []checkpoint.StateHandle{handle(0, 0, 0, "source-0.state", 3608549767)}},
		},
	}
	if !reflect.DeepEqual(*m, want) {
		t.Fatalf("metadata = %+v\nwant       %+v", *m, want)
	}
	metaFile := readFixture(t, "job", fixtureChk, "_metadata")
	if again, err := format.EncodeMetadata(*m); err != nil || !bytes.Equal(again, metaFile) {
		t.Errorf("metadata encodes back as %q, %v\nwant %q", again, err, metaFile)
	}

	snaps := map[string][]checkpoint.SubtaskSnapshot{}
	for _, op := range m.Operators {
		for _, h := range op.Subtasks {
			snap, err := s.ReadState(m.ID, m.Kind, h)
			if err != nil {
				t.Fatalf("%s: %v", h.File, err)
			}
			file := readFixture(t, "job", fixtureChk, h.File)
			if again, err := format.EncodeState(snap); err != nil || !bytes.Equal(again, file) {
				t.Errorf("%s encodes back as %x, %v\nwant %x", h.File, again, err, file)
			}
			snaps[op.Name] = append(snaps[op.Name], snap)
		}
	}
	checkCount(t, m.Operators[0], snaps["count"])
	checkSink(t, snaps["sink"])
	checkSource(t, snaps["source"])
}

// countBackend is a backend with the states of operator "count".
type countBackend struct {
	b      *state.KeyedBackend[string]
	count  *state.ValueState[string, int64]
	events *state.ListState[string, string]
	last   *state.MapState[string, string, int64]
}

func newCountBackend(t *testing.T, r state.KeyGroupRange) countBackend {
	t.Helper()
	b := state.NewKeyedBackend[string](state.StringCodec{}, fixtureMaxPar, r)
	count, err1 := state.NewValueState[string, int64](b.Scope(), "count", state.Int64Codec{})
	events, err2 := state.NewListState[string, string](b.Scope(), "events", state.StringCodec{})
	last, err3 := state.NewMapState[string, string, int64](b.Scope(), "last", state.StringCodec{}, state.Int64Codec{})
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	return countBackend{b, count, events, last}
}

// checkCount restores each subtask's keyed state and checks every key's
// state, timers and key group, the watermark entries, and that a snapshot
// of the restored state gives the fixture's blobs again.
func checkCount(t *testing.T, op checkpoint.OperatorState, snaps []checkpoint.SubtaskSnapshot) {
	for sub, snap := range snaps {
		h := op.Subtasks[sub]
		c := newCountBackend(t, state.KeyGroupRange{Start: h.KeyGroupStart, End: h.KeyGroupEnd})
		for kg, blob := range snap.KeyGroups {
			if err := c.b.Restore(kg, blob); err != nil {
				t.Fatalf("count[%d] key group %d: %v", sub, kg, err)
			}
		}
		var groups []int
		for i, k := range fixtureKeys[sub] {
			groups = append(groups, c.b.KeyGroupOf(k))
			c.b.SetCurrentKey(k)
			if v, ok := c.count.Value(); !ok || v != int64(10*sub+i+1) {
				t.Errorf("count[%d] %s: count = %d, %v; want %d", sub, k, v, ok, 10*sub+i+1)
			}
			if got, want := c.events.Get(), []string{k + "-e1", k + "-e2"}; !slices.Equal(got, want) {
				t.Errorf("count[%d] %s: events = %q, want %q", sub, k, got, want)
			}
			if c.last.Len() != 1 {
				t.Errorf("count[%d] %s: last holds %d entries, want 1", sub, k, c.last.Len())
			}
			if v, ok := c.last.Get("x"); !ok || v != int64(100+i) {
				t.Errorf("count[%d] %s: last[x] = %d, %v; want %d", sub, k, v, ok, 100+i)
			}
		}
		slices.Sort(groups)
		if got := slices.Sorted(func(yield func(int) bool) {
			for kg := range snap.KeyGroups {
				if !yield(kg) {
					return
				}
			}
		}); !slices.Equal(got, groups) {
			t.Errorf("count[%d]: key groups %v, want those of its keys, %v", sub, got, groups)
		}
		again, err := c.b.Snapshot()()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(again, snap.KeyGroups) {
			t.Errorf("count[%d]: the restored state snapshots as %x\nwant %x", sub, again, snap.KeyGroups)
		}
		keys := fixtureKeys[sub]
		wantTimers := []state.Timer[string]{{Key: keys[0], When: fixtureNow.Add(time.Minute)}}
		if got := c.b.PopDueTimers(fixtureNow.Add(time.Hour), nil); !timersEqual(got, wantTimers) {
			t.Errorf("count[%d]: processing-time timers %v, want %v", sub, got, wantTimers)
		}
		wantTimers = []state.Timer[string]{{Key: keys[1], When: fixtureNow.Add(2 * time.Minute)}}
		if got := c.b.PopEventTimers(fixtureNow.Add(time.Hour).UnixNano(), nil); !timersEqual(got, wantTimers) {
			t.Errorf("count[%d]: event-time timers %v, want %v", sub, got, wantTimers)
		}

		wantWM := fixtureNow.Add(-time.Duration(sub+1) * time.Second).UnixNano()
		if len(snap.Entries) != 1 {
			t.Fatalf("count[%d]: %d entries, want 1 watermark", sub, len(snap.Entries))
		}
		wm, err := format.DecodeWatermark(snap.Entries[0])
		if err != nil || wm != wantWM {
			t.Errorf("count[%d]: watermark %d, %v; want %d", sub, wm, err, wantWM)
		}
		if again := format.EncodeWatermark(wm); !bytes.Equal(again, snap.Entries[0]) {
			t.Errorf("count[%d]: watermark encodes back as %x, want %x", sub, again, snap.Entries[0])
		}
	}
}

func timersEqual(a, b []state.Timer[string]) bool {
	return slices.EqualFunc(a, b, func(x, y state.Timer[string]) bool { return x.Key == y.Key && x.When.Equal(y.When) })
}

func checkSink(t *testing.T, snaps []checkpoint.SubtaskSnapshot) {
	if len(snaps) != 1 || len(snaps[0].Entries) != 1 || snaps[0].KeyGroups != nil {
		t.Fatalf("sink snapshots %+v, want one entry", snaps)
	}
	e := snaps[0].Entries[0]
	c, err := format.DecodeCommittable(e)
	want := sink.Committable{Checkpoint: 1, Subtask: 0, Incarnation: fixtureIncarnation, Data: []byte("txn-0001")}
	if err != nil || !reflect.DeepEqual(c, want) {
		t.Fatalf("committable = %+v, %v; want %+v", c, err, want)
	}
	if e[0] != format.CommittableV2 {
		t.Errorf("committable version %d, want %d", e[0], format.CommittableV2)
	}
	if again := format.EncodeCommittable(c); !bytes.Equal(again, e) {
		t.Errorf("committable encodes back as %x, want %x", again, e)
	}
}

func checkSource(t *testing.T, snaps []checkpoint.SubtaskSnapshot) {
	if len(snaps) != 1 || snaps[0].KeyGroups != nil {
		t.Fatalf("source snapshots %+v, want one subtask without key groups", snaps)
	}
	want := []format.SplitPosition{
		{Split: "in/a.txt", Pos: []byte("offset=17"), Newest: fixtureNow.Add(-time.Second).UnixNano()},
		{Split: "in/b.txt", Pos: []byte("offset=99"), Done: true, Newest: format.NoEventTime},
	}
	if len(snaps[0].Entries) != len(want) {
		t.Fatalf("source has %d entries, want %d", len(snaps[0].Entries), len(want))
	}
	for i, e := range snaps[0].Entries {
		p, err := format.DecodeSplitPosition(e)
		if err != nil || !reflect.DeepEqual(p, want[i]) {
			t.Errorf("split position %d = %+v, %v; want %+v", i, p, err, want[i])
		}
		if again := format.EncodeSplitPosition(p); !bytes.Equal(again, e) {
			t.Errorf("split position %d encodes back as %x, want %x", i, again, e)
		}
	}
}

// TestCompatRestoreWithTTL restores the previous release's keyed state,
// which has no TTL, into the same states declared with one: every entry is
// there and expires a TTL after the restore's clock; a snapshot of it is a
// version 3 state file of version 2 blobs, which restores again with the
// same expiries.
func TestCompatRestoreWithTTL(t *testing.T) {
	dir := copyFixture(t, "job")
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.Latest()
	if err != nil || m == nil {
		t.Fatalf("Latest = %v, %v", m, err)
	}
	const ttl = time.Hour
	restoredAt := fixtureNow.Add(24 * time.Hour)
	newTTLBackend := func(r state.KeyGroupRange) countBackend {
		b := state.NewKeyedBackend[string](state.StringCodec{}, fixtureMaxPar, r)
		b.SetWatermark(restoredAt.UnixNano())
		opt := state.WithTTL(state.TTL{After: ttl})
		count, err1 := state.NewValueState[string, int64](b.Scope(), "count", state.Int64Codec{}, opt)
		events, err2 := state.NewListState[string, string](b.Scope(), "events", state.StringCodec{}, opt)
		last, err3 := state.NewMapState[string, string, int64](b.Scope(), "last", state.StringCodec{}, state.Int64Codec{}, opt)
		if err := errors.Join(err1, err2, err3); err != nil {
			t.Fatal(err)
		}
		return countBackend{b, count, events, last}
	}
	check := func(c countBackend, sub int, present bool) {
		t.Helper()
		for i, k := range fixtureKeys[sub] {
			c.b.SetCurrentKey(k)
			v, ok := c.count.Value()
			events, n := c.events.Get(), c.last.Len()
			if !present {
				if ok || events != nil || n != 0 {
					t.Errorf("count[%d] %s after its TTL: count %d, %v; events %q; last has %d entries; want nothing", sub, k, v, ok, events, n)
				}
				continue
			}
			if !ok || v != int64(10*sub+i+1) || !slices.Equal(events, []string{k + "-e1", k + "-e2"}) || n != 1 {
				t.Errorf("count[%d] %s: count %d, %v; events %q; last has %d entries", sub, k, v, ok, events, n)
			}
		}
	}
	op := m.Operators[0]
	for sub, h := range op.Subtasks {
		snap, err := s.ReadState(m.ID, m.Kind, h)
		if err != nil {
			t.Fatal(err)
		}
		r := state.KeyGroupRange{Start: h.KeyGroupStart, End: h.KeyGroupEnd}
		c := newTTLBackend(r)
		for kg, blob := range snap.KeyGroups {
			if err := c.b.Restore(kg, blob); err != nil {
				t.Fatalf("count[%d] key group %d: %v", sub, kg, err)
			}
		}
		c.b.SetWatermark(restoredAt.Add(ttl - 1).UnixNano())
		check(c, sub, true)
		blobs, err := c.b.Snapshot()()
		if err != nil {
			t.Fatal(err)
		}
		file, err := format.EncodeState(checkpoint.SubtaskSnapshot{KeyGroups: blobs})
		if err != nil {
			t.Fatal(err)
		}
		again, version, err := format.UnsealVersion("f", format.StateMagic, file)
		if err != nil || version != format.StateTTLVersion || len(again) == 0 {
			t.Fatalf("count[%d] with TTLs: state file version %d, %v; want %d", sub, version, err, format.StateTTLVersion)
		}
		for _, blob := range blobs {
			if blob[0] != format.StateBlobTTLVersion {
				t.Fatalf("count[%d] with TTLs: blob version %d, want %d", sub, blob[0], format.StateBlobTTLVersion)
			}
		}
		d := newTTLBackend(r)
		for kg, blob := range blobs {
			if err := d.b.Restore(kg, blob); err != nil {
				t.Fatal(err)
			}
		}
		d.b.SetWatermark(restoredAt.Add(ttl - 1).UnixNano())
		check(d, sub, true)
		d.b.SetWatermark(restoredAt.Add(ttl).UnixNano())
		check(d, sub, false)
		c.b.SetWatermark(restoredAt.Add(ttl).UnixNano())
		check(c, sub, false)
	}
}

// TestCompatVersion1 decodes the version 1 encodings the previous release
// read: they decode to the same values, and encode again in the current
// version (so no byte-for-byte round trip).
func TestCompatVersion1(t *testing.T) {
	c, err := format.DecodeCommittable(readFixture(t, "v1", "committable-v1.bin"))
	want := sink.Committable{Checkpoint: 42, Subtask: 3, Data: []byte("txn-42")}
	if err != nil || !reflect.DeepEqual(c, want) {
		t.Errorf("v1 committable = %+v, %v; want %+v", c, err, want)
	}
	if again, err := format.DecodeCommittable(format.EncodeCommittable(c)); err != nil || !reflect.DeepEqual(again, c) {
		t.Errorf("v1 committable re-encoded as v2 decodes as %+v, %v", again, err)
	}
	p, err := format.DecodeSplitPosition(readFixture(t, "v1", "split-position-v1.bin"))
	wantP := format.SplitPosition{Split: "in/c.txt", Pos: []byte("off=5"), Done: true, Newest: format.NoEventTime}
	if err != nil || !reflect.DeepEqual(p, wantP) {
		t.Errorf("v1 split position = %+v, %v; want %+v", p, err, wantP)
	}
}

// TestCompatCorrupt checks that a completed checkpoint of the previous
// release with one flipped byte in a state file is detected as corrupt,
// naming the file, and stops the job unless corrupt checkpoints are skipped.
func TestCompatCorrupt(t *testing.T) {
	dir := copyFixture(t, "corrupt")
	file := filepath.Join(dir, fixtureChk, "count-0.state")
	s, err := store.Open(dir, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load(filepath.Join(dir, fixtureChk)); !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), file) {
		t.Errorf("Load = %v; want ErrCorrupt naming %s", err, file)
	}
	if m, err := s.Latest(); m != nil || !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), file) || !errors.Is(err, store.ErrCorruptCompleted) {
		t.Errorf("Latest = %v, %v; want ErrCorrupt naming %s and wrapping store.ErrCorruptCompleted", m, err, file)
	}
	// The flipped byte is in the payload: the file's own checksum catches it
	// too, not only the one the metadata records.
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := format.DecodeState(file, b); !errors.Is(err, checkpoint.ErrCorrupt) || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("DecodeState = %v; want a checksum mismatch", err)
	}
	skip, err := store.Open(dir, store.Options{SkipCorrupt: true})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := skip.Latest(); m != nil || err != nil || skip.Skipped() != 1 {
		t.Errorf("Latest with SkipCorrupt = %v, %v (skipped %d); want nil, nil, 1 skipped", m, err, skip.Skipped())
	}
}
