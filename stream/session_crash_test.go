package stream_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/internal/crashtest/crashtesting"
	"github.com/exactlyonce/exactly/source"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// TestSessionsCrashExactlyOnce runs session windows with allowed lateness
// and a side output of late records in a child process, SIGKILLed again
// and again; what the two file sinks committed must equal the output of a
// failure-free run, line by line: every result and late firing once, every
// late record once.
func TestSessionsCrashExactlyOnce(t *testing.T) { sessionsCrashTest(t, state.HeapBackend) }

// TestSessionsCrashExactlyOncePebble is TestSessionsCrashExactlyOnce with
// the sessions in the Pebble backend.
func TestSessionsCrashExactlyOncePebble(t *testing.T) { sessionsCrashTest(t, state.PebbleBackend) }

// sessionCrashRecords is the input of the session crash test.
const sessionCrashRecords = 12_000

func sessionsCrashTest(t *testing.T, backend state.BackendKind) {
	if testing.Short() {
		t.Skip("crash test: skipped with -short")
	}
	dir := crashDir(t, "EXACTLY_SESSION_CRASH_DIR")
	if crashtest.IsChild() {
		if err := runSessionCrashJob(dir, backend, true); err != nil {
			t.Fatal(err)
		}
		return
	}
	// The failure-free run is on the heap backend whatever backend the
	// crash run uses (see twoInputCrashTest).
	ref := t.TempDir()
	if err := runSessionCrashJob(ref, state.HeapBackend, false); err != nil {
		t.Fatalf("failure-free run: %v", err)
	}
	wantOut, wantLate := readCommittedLines(t, filepath.Join(ref, "out")), readCommittedLines(t, filepath.Join(ref, "late"))
	updates := 0
	for _, l := range wantOut {
		if !strings.Contains(l, ",0,") {
			updates++
		}
	}
	t.Logf("failure-free run: %d results, %d of them late firings, %d late records", len(wantOut), updates, len(wantLate))
	if updates == 0 || len(wantLate) == 0 {
		t.Fatalf("the input exercised no late firing (%d) or no late record (%d)", updates, len(wantLate))
	}
	crashtesting.RunLive(t, crashtest.Options{Kills: crashtesting.Sized(10, 30), MaxDelay: 1200 * time.Millisecond, Env: []string{"EXACTLY_SESSION_CRASH_DIR=" + dir}}, 6)
	for name, want := range map[string][]string{"out": wantOut, "late": wantLate} {
		got := readCommittedLines(t, filepath.Join(dir, name))
		if !slices.Equal(got, want) {
			t.Errorf("sink %s: %d lines committed, the failure-free run committed %d; first difference: %s", name, len(got), len(want), firstDifference(got, want))
		}
	}
}

// sessionEventTime is the event time of record i in ms: 8 keys (i % 8),
// each one's records 8 ms apart in blocks of 100 records 40 ms apart, so
// that sessions of 20 ms end with each block; every 5th record lags by
// 15 ms (late, within the lateness of 30 ms or joining an open session),
// every 23rd by 70 ms (a late firing of the previous block's session, or a
// late record).
func sessionEventTime(i int) time.Time {
	t := int64(i) + 40*int64(i/100)
	switch {
	case i%23 == 0:
		t -= 70
	case i%5 == 0:
		t -= 15
	}
	return time.UnixMilli(t)
}

// runSessionCrashJob runs records [0, sessionCrashRecords) -> keyBy(i % 8)
// -> sessions of 20 ms with a lateness of 30 ms -> file sink out, and the
// late records -> file sink late, resuming from the checkpoints in dir.
// One split read one record at a time, with the watermark sent after each,
// makes the output deterministic; paced, the input outlasts the kills.
func runSessionCrashJob(dir string, backend state.BackendKind, paced bool) error {
	out, err := file.NewSink(filepath.Join(dir, "out"), func(dst []byte, w sessionOut) []byte {
		return fmt.Appendf(dst, "%d,%d,%d,%d,%d,%d", w.Key, w.Start, w.End, w.Firing, w.Count, w.Sum)
	}, file.SinkOptions{})
	if err != nil {
		return err
	}
	late, err := file.NewSink(filepath.Join(dir, "late"), func(dst []byte, v int) []byte { return fmt.Appendf(dst, "%d", v) }, file.SinkOptions{})
	if err != nil {
		return err
	}
	j := stream.New("sessions")
	nums := stream.SourceWithEventTime(j, "numbers", pacedSource{n: sessionCrashRecords, paced: paced},
		stream.EventTime[int]{Timestamp: sessionEventTime, MaxOutOfOrderness: 10 * time.Millisecond})
	keyed := stream.KeyBy(nums, func(v int) int64 { return int64(v % 8) }, state.Int64Codec{})
	tooLate := stream.NewOutputTag[int]("too-late")
	sessions := stream.WindowAggregate(keyed, "sessions", stream.Session(20*time.Millisecond), sessionEventTime,
		stream.Aggregate[int64, int, sumAcc, sessionOut]{
			Add:   func(a sumAcc, v int) sumAcc { return sumAcc{a.Count + 1, a.Sum + v} },
			Merge: func(a, b sumAcc) sumAcc { return sumAcc{a.Count + b.Count, a.Sum + b.Sum} },
			Result: func(k int64, w stream.Window, a sumAcc) sessionOut {
				return sessionOut{Key: k, Start: w.Start.UnixMilli(), End: w.End.UnixMilli(), Firing: w.Firing, Count: a.Count, Sum: a.Sum}
			},
			Codec: sumAccCodec{},
		}, stream.AllowedLateness(30*time.Millisecond), stream.LateRecords(tooLate), stream.Parallelism(2))
	stream.SinkTo(sessions, "out", out)
	stream.SinkTo(stream.SideOutput(sessions, tooLate), "late", late)
	if backend == state.PebbleBackend {
		j.SetStateBackend(state.BackendConfig{Kind: backend, Dir: filepath.Join(dir, "pebble")})
	}
	return j.Run(context.Background(), crashRunOptions(dir))
}

// sessionOut is a result of the session crash test.
type sessionOut struct {
	Key        int64
	Start, End int64 // ms
	Firing     int
	Count, Sum int
}

// pacedSource reads the integers [0, n) from one split, one per Read;
// paced, it sleeps a millisecond every third.
type pacedSource struct {
	n     int
	paced bool
}

func (p pacedSource) Splits(context.Context) ([]string, error) { return splitIDs(1), nil }

func (p pacedSource) Open(_ context.Context, split string, pos []byte) (source.Reader[int], error) {
	_, next := openedAt(split, pos)
	return &pacedReader{src: p, next: next}, nil
}

type pacedReader struct {
	src  pacedSource
	next int
}

func (r *pacedReader) Read(_ context.Context, buf []int) (int, error) {
	if r.next == r.src.n {
		return 0, io.EOF
	}
	if r.src.paced && r.next%3 == 0 {
		time.Sleep(time.Millisecond)
	}
	buf[0] = r.next
	r.next++
	return 1, nil
}

func (r *pacedReader) Position() []byte { return binary.AppendUvarint(nil, uint64(r.next)) }
func (r *pacedReader) Close() error     { return nil }

// firstDifference describes where two sorted lists of lines first differ.
func firstDifference(got, want []string) string {
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			return fmt.Sprintf("line %d: got %q, want %q", i, got[i], want[i])
		}
	}
	return fmt.Sprintf("one is a prefix of the other (%d and %d lines)", len(got), len(want))
}
