package generator

import (
	"context"
	"errors"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/source"
)

// event derives a deterministic event from its index, as the demo does.
func event(i uint64) uint64 { return i<<32 | Rand(42, i).Uint64()>>32 }

func mustNew(t *testing.T, opts Options) *Source[uint64] {
	t.Helper()
	s, err := New(opts, event)
	if err != nil {
		t.Fatalf("New(%+v): %v", opts, err)
	}
	return s
}

func mustOpen(t *testing.T, s *Source[uint64], split string, pos []byte) source.Reader[uint64] {
	t.Helper()
	r, err := s.Open(context.Background(), split, pos)
	if err != nil {
		t.Fatalf("Open(%q, %x): %v", split, pos, err)
	}
	return r
}

// drain reads r to EOF with a buffer of size bufLen and returns the events
// and the position after each Read that returned events.
func drain(t *testing.T, r source.Reader[uint64], bufLen int) (events []uint64, positions [][]byte) {
	t.Helper()
	buf := make([]uint64, bufLen)
	for {
		n, err := r.Read(context.Background(), buf)
		if errors.Is(err, io.EOF) {
			return events, positions
		}
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		if n == 0 {
			t.Fatal("Read returned 0, nil without a rate limit")
		}
		events = append(events, buf[:n]...)
		positions = append(positions, r.Position())
	}
}

func TestDeterministic(t *testing.T) {
	a := mustNew(t, Options{Count: 100, Splits: 3})
	b := mustNew(t, Options{Count: 100, Splits: 3})
	for _, split := range []string{"gen-0", "gen-1", "gen-2"} {
		ea, _ := drain(t, mustOpen(t, a, split, nil), 7)
		eb, _ := drain(t, mustOpen(t, b, split, nil), 13)
		if !slices.Equal(ea, eb) {
			t.Errorf("split %s differs between runs:\n%v\n%v", split, ea, eb)
		}
	}
	if Rand(1, 2).Uint64() != Rand(1, 2).Uint64() || Rand(1, 2).Uint64() == Rand(1, 3).Uint64() {
		t.Error("Rand is not a deterministic function of (seed, index)")
	}
}

func TestSplitsPartitionIndices(t *testing.T) {
	for _, tc := range []struct {
		count  uint64
		splits int
	}{{1, 4}, {10, 4}, {12, 4}, {3, 5}, {1000, 7}, {5, 1}} {
		s := mustNew(t, Options{Count: tc.count, Splits: tc.splits})
		ids, err := s.Splits(context.Background())
		if err != nil || len(ids) != tc.splits || ids[0] != "gen-0" {
			t.Fatalf("Splits() = %v, %v", ids, err)
		}
		seen := make([]int, tc.count)
		for _, id := range ids {
			events, _ := drain(t, mustOpen(t, s, id, nil), 3)
			for _, e := range events {
				idx := e >> 32
				if idx >= tc.count {
					t.Fatalf("count %d: split %s yielded index %d", tc.count, id, idx)
				}
				seen[idx]++
			}
		}
		for i, n := range seen {
			if n != 1 {
				t.Errorf("count %d splits %d: index %d yielded %d times", tc.count, tc.splits, i, n)
			}
		}
	}
}

func TestResumeFromEveryPosition(t *testing.T) {
	s := mustNew(t, Options{Count: 50, Splits: 3})
	for _, split := range []string{"gen-0", "gen-1", "gen-2"} {
		all, _ := drain(t, mustOpen(t, s, split, nil), 100)
		var positions [][]byte
		r := mustOpen(t, s, split, nil)
		buf := make([]uint64, 1)
		for {
			if _, err := r.Read(context.Background(), buf); err != nil {
				break
			}
			positions = append(positions, r.Position())
		}
		for i, pos := range positions {
			rest, _ := drain(t, mustOpen(t, s, split, pos), 4)
			if !slices.Equal(rest, all[i+1:]) {
				t.Errorf("split %s resumed at %x: got %v, want %v", split, pos, rest, all[i+1:])
			}
		}
	}
}

func TestUnboundedNeverEnds(t *testing.T) {
	s := mustNew(t, Options{Splits: 2})
	r := mustOpen(t, s, "gen-1", nil)
	buf := make([]uint64, 1000)
	for range 10 {
		if n, err := r.Read(context.Background(), buf); n != len(buf) || err != nil {
			t.Fatalf("Read = %d, %v", n, err)
		}
	}
	if got := buf[999] >> 32; got != 1+2*9999 {
		t.Errorf("last index = %d, want %d", got, 1+2*9999)
	}
}

func TestRateLimitWithFakeClock(t *testing.T) {
	now := time.Unix(1000, 0)
	clock := func() time.Time { return now }
	// 40 events/s across 4 splits: 10/s per split.
	s := mustNew(t, Options{Count: 1000, Splits: 4, Rate: 40, Now: clock})
	r := mustOpen(t, s, "gen-2", nil)
	buf := make([]uint64, 100)
	read := func() int {
		n, err := r.Read(context.Background(), buf)
		if err != nil {
			t.Fatalf("Read: %v", err)
		}
		return n
	}
	if n := read(); n != 0 {
		t.Fatalf("at open: read %d events, want 0", n)
	}
	now = now.Add(250 * time.Millisecond)
	if n := read(); n != 2 {
		t.Fatalf("after 250ms: read %d, want 2", n)
	}
	if n := read(); n != 0 {
		t.Fatalf("again after 250ms: read %d, want 0", n)
	}
	now = now.Add(time.Second)
	if n := read(); n != 10 {
		t.Fatalf("after 1.25s: read %d, want 10 more", n)
	}
	// A reader not read for an hour catches up by one second of its
	// share, not by the hour's 36,000 events.
	now = now.Add(time.Hour)
	if n := read(); n != 10 {
		t.Fatalf("after an hour: read %d, want one second's 10", n)
	}
	if n := read(); n != 0 {
		t.Fatalf("right after the catch-up: read %d, want 0", n)
	}
	now = now.Add(150 * time.Millisecond)
	if n := read(); n != 1 {
		t.Fatalf("150ms after the catch-up: read %d, want 1", n)
	}
	now = now.Add(50 * time.Millisecond) // the half event left over adds up
	if n := read(); n != 1 {
		t.Fatalf("200ms after the catch-up: read %d, want 1", n)
	}
	// A clock going back takes nothing from the bucket.
	now = now.Add(-time.Minute)
	if n := read(); n != 0 {
		t.Fatalf("after the clock went back: read %d, want 0", n)
	}
	now = now.Add(time.Minute + time.Second)
	if n := read(); n != 10 {
		t.Fatalf("a second after the clock came back: read %d, want 10", n)
	}
	// A resumed reader counts its share from its own Open.
	r2 := mustOpen(t, s, "gen-2", r.Position())
	if n, err := r2.Read(context.Background(), buf); n != 0 || err != nil {
		t.Fatalf("resumed reader at open: %d, %v", n, err)
	}
	now = now.Add(time.Second)
	if n, err := r2.Read(context.Background(), buf); n != 10 || err != nil {
		t.Fatalf("resumed reader after 1s: %d, %v", n, err)
	}
}

func TestOptionValidation(t *testing.T) {
	for _, tc := range []struct {
		opts Options
		want string
	}{
		{Options{Splits: -1}, "Options.Splits is -1"},
		{Options{Splits: MaxSplits + 1}, "Options.Splits is 65537"},
		{Options{Rate: -1}, "Options.Rate is -1"},
		{Options{Rate: math.NaN()}, "Options.Rate is NaN"},
		{Options{Rate: math.Inf(1)}, "Options.Rate is +Inf"},
	} {
		if _, err := New(tc.opts, event); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tc.opts, err, tc.want)
		}
	}
	if _, err := New[int](Options{}, nil); err == nil || !strings.Contains(err.Error(), "gen is nil") {
		t.Errorf("New with nil gen = %v", err)
	}
	s := mustNew(t, Options{})
	if ids, _ := s.Splits(context.Background()); len(ids) != DefaultSplits {
		t.Errorf("default splits = %d, want %d", len(ids), DefaultSplits)
	}
}

func TestOpenRejectsBadInput(t *testing.T) {
	s := mustNew(t, Options{Count: 10, Splits: 2})
	for _, tc := range []struct {
		split string
		pos   []byte
		want  string
	}{
		{"gen-2", nil, "unknown split"},
		{"gen-01", nil, "unknown split"},
		{"gen--1", nil, "unknown split"},
		{"other", nil, "unknown split"},
		{"gen-0", []byte{}, "not a uvarint"},
		{"gen-0", []byte{0x80}, "not a uvarint"},
		{"gen-0", []byte{1, 2}, "not a uvarint"},
		{"gen-0", []byte{6}, "past the split's 5 events"},
	} {
		if _, err := s.Open(context.Background(), tc.split, tc.pos); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q, %x) = %v, want an error containing %q", tc.split, tc.pos, err, tc.want)
		}
	}
	// The end position is valid and yields EOF at once.
	r := mustOpen(t, s, "gen-0", []byte{5})
	if n, err := r.Read(context.Background(), make([]uint64, 4)); n != 0 || !errors.Is(err, io.EOF) {
		t.Errorf("Read at end = %d, %v, want 0, EOF", n, err)
	}
}
