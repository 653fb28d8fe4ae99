package kafka

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestUpstreamWatermarks runs the partition's watermark through scripts
// of what its upstream writers say.
func TestUpstreamWatermarks(t *testing.T) {
	const minWM = math.MinInt64
	type step struct {
		writer string
		wm     int64
		idle   bool
		resume bool // resume at wm instead of hearing writer
		want   int64
		idleP  bool // the partition is idle
	}
	for _, tc := range []struct {
		name  string
		want  int
		steps []step
	}{
		{"none until every writer is heard from", 2, []step{
			{writer: "a", wm: 10, want: minWM},
			{writer: "a", wm: 20, want: minWM},
			{writer: "b", wm: 15, want: 15},
			{writer: "b", wm: 30, want: 20},
			{writer: "a", wm: 40, want: 30},
		}},
		{"a writer's watermark does not go back", 2, []step{
			{writer: "a", wm: 10, want: minWM},
			{writer: "b", wm: 20, want: 10},
			{writer: "a", wm: 5, want: 10},
			{writer: "a", wm: 25, want: 20},
		}},
		{"idle writers do not hold the watermark back", 3, []step{
			{writer: "a", wm: 10, want: minWM},
			{writer: "b", wm: 50, want: minWM},
			{writer: "c", wm: minWM, idle: true, want: 10},
			{writer: "a", wm: 10, idle: true, want: 50},
			{writer: "b", wm: 50, idle: true, want: 50, idleP: true},
			{writer: "a", wm: 20, want: 50}, // active again, behind: the watermark stays
			{writer: "a", wm: 60, want: 50}, // b and c hold the partition since a resumed
		}},
		{"idle writers hold the watermark for resumeRounds when another resumes", 2, []step{
			{writer: "a", wm: 10, want: minWM},
			{writer: "b", wm: 10, want: 10},
			{writer: "a", wm: 10, idle: true, want: 10},
			{writer: "b", wm: 10, idle: true, want: 10, idleP: true},
			{writer: "a", wm: 20, want: 10},             // a resumed: b, idle, holds (1 mark of a)
			{writer: "b", wm: 10, idle: true, want: 10}, // b's own idle marks neither end nor count its hold
			{writer: "a", wm: 30, want: 10},
			{writer: "b", wm: 10, idle: true, want: 10},
			{writer: "a", wm: 40, want: 10},
			{writer: "b", wm: 10, idle: true, want: 10},
			{writer: "a", wm: 50, want: 10},
			{writer: "b", wm: 10, idle: true, want: 10},
			{writer: "a", wm: 60, want: 10}, // 5 marks of a: b still holds
			{writer: "b", wm: 10, idle: true, want: 10},
			{writer: "a", wm: 70, want: 70},             // 6: b's hold is over
			{writer: "b", wm: 15, idle: true, want: 70}, // idle again: no new hold
			{writer: "a", wm: 70, idle: true, want: 70, idleP: true},
			{writer: "a", wm: 80, want: 80},             // a resumed, but b was not active since its hold
			{writer: "b", wm: 85, want: 80},             // b active
			{writer: "b", wm: 85, idle: true, want: 80}, // and idle again
			{writer: "a", wm: 90, idle: true, want: 90, idleP: true},
			{writer: "a", wm: 100, want: 90},  // a resumed: b holds again
			{writer: "b", wm: 101, want: 100}, // b resumed in its hold: nothing was late
		}},
		{"a restore's watermark is the floor", 2, []step{
			{resume: true, wm: 100, want: 100},
			{writer: "a", wm: 10, want: 100},
			{writer: "b", wm: 20, want: 100},
			{writer: "a", wm: 200, want: 100},
			{writer: "b", wm: 150, want: 150},
		}},
		{"an idle writer that falls silent holds the watermark back again", 2, []step{
			{writer: "a", wm: 10, want: minWM},
			{writer: "b", wm: 10, idle: true, want: 10},
			{writer: "a", wm: 20, want: 20},
			{writer: "a", wm: 30, want: 30},
			{writer: "a", wm: 40, want: 40}, // b missed staleRounds marks of a: still idle
			{writer: "a", wm: 50, want: 40}, // one more: b holds the partition at the floor
			{writer: "a", wm: 60, want: 40},
			{writer: "b", wm: 10, idle: true, want: 60}, // heard again, idle: passed by
			{writer: "b", wm: 55, want: 60},             // active, behind the floor: the watermark stays
			{writer: "a", wm: 70, want: 60},
			{writer: "b", wm: 65, want: 65},
		}},
		{"silent idle writers stop an idle partition being idle", 3, []step{
			{writer: "a", wm: 10, idle: true, want: minWM},
			{writer: "b", wm: 20, idle: true, want: minWM},
			{writer: "c", wm: 30, idle: true, want: 30, idleP: true},
			{writer: "b", wm: 20, idle: true, want: 30, idleP: true},
			{writer: "c", wm: 30, idle: true, want: 30, idleP: true},
			{writer: "b", wm: 20, idle: true, want: 30, idleP: true},
			{writer: "c", wm: 30, idle: true, want: 30, idleP: true}, // a missed 6 marks = staleRounds × 2 writers
			{writer: "b", wm: 20, idle: true, want: 30},              // 7: a holds the partition, which is not idle
		}},
		{"negative event times", 1, []step{
			{writer: "a", wm: -50, want: -50},
			{writer: "a", wm: -10, want: -10},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := newUpstreamWatermarks(tc.want)
			for i, s := range tc.steps {
				if s.resume {
					u.resume(s.wm)
				} else if err := u.heard(s.writer, upstreamMark{wm: s.wm, idle: s.idle}); err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				wm, idle := u.watermark()
				if wm != s.want || idle != s.idleP {
					t.Fatalf("step %d (%+v): watermark %d idle %v, want %d idle %v", i, s, wm, idle, s.want, s.idleP)
				}
			}
		})
	}
}

// TestUpstreamWatermarksTooManyWriters: a writer beyond
// SourceOptions.Upstreams is an error naming the writers and the fix,
// never silently part of the minimum.
func TestUpstreamWatermarksTooManyWriters(t *testing.T) {
	u := newUpstreamWatermarks(2)
	for _, w := range []string{"job.t.0/out/0", "job.t.1/out/0"} {
		if err := u.heard(w, upstreamMark{wm: 1}); err != nil {
			t.Fatal(err)
		}
	}
	err := u.heard("job.t.2/out/0", upstreamMark{wm: 1})
	if err == nil || !strings.Contains(err.Error(), `writer "job.t.2/out/0" and 2 others (job.t.0/out/0, job.t.1/out/0)`) || !strings.Contains(err.Error(), "SourceOptions.Upstreams = 2") {
		t.Fatalf("third writer of two: %v", err)
	}
}

// TestWatermarkHeader: what the sink writes, the source reads; damaged
// headers are errors, never a watermark.
func TestWatermarkHeader(t *testing.T) {
	for _, m := range []upstreamMark{{wm: 1_700_000_000_000_000_000}, {wm: math.MinInt64, idle: true}, {wm: -3}} {
		w, got, err := decodeWatermark(encodeWatermark("job/sink/3", m.wm, m.idle))
		if err != nil || w != "job/sink/3" || got != m {
			t.Fatalf("round trip of %+v: %q %+v %v", m, w, got, err)
		}
	}
	good := encodeWatermark("w", 5, false)
	for name, v := range map[string][]byte{
		"short":         good[:10],
		"version 2":     append([]byte{2}, good[1:]...),
		"unknown flags": append([]byte{1, 2}, good[2:]...),
	} {
		if _, _, err := decodeWatermark(v); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	control := &kgo.Record{Headers: []kgo.RecordHeader{{Key: watermarkHeader, Value: good}}}
	if _, ok := controlWatermark(control); !ok {
		t.Error("a control record is not recognized")
	}
	reproduced := &kgo.Record{Headers: append(slices.Clone(control.Headers), kgo.RecordHeader{Key: ReproducesHeader, Value: []byte("txn/1/0")})}
	if _, ok := controlWatermark(reproduced); !ok {
		t.Error("a reproduced control record is not recognized")
	}
	for name, r := range map[string]*kgo.Record{
		"with a key":        {Key: []byte("k"), Headers: control.Headers},
		"with a value":      {Value: []byte("v"), Headers: control.Headers},
		"other header":      {Headers: []kgo.RecordHeader{{Key: "trace", Value: good}}},
		"two headers":       {Headers: append([]kgo.RecordHeader{{Key: "trace"}}, control.Headers...)},
		"header after":      {Headers: append(slices.Clone(control.Headers), kgo.RecordHeader{Key: "trace"})},
		"three headers":     {Headers: append(slices.Clone(reproduced.Headers), kgo.RecordHeader{Key: ReproducesHeader})},
		"plain data record": {Key: []byte("k"), Value: []byte("v")},
	} {
		if _, ok := controlWatermark(r); ok {
			t.Errorf("%s: taken for a control record", name)
		}
	}
}

// TestControlPartitioner: control records go to the partition they name,
// keyed records where Kafka's default partitioner puts them; once the
// topic's count is pinned, by the pinned count whatever the metadata says,
// and a count that differs is noted.
func TestControlPartitioner(t *testing.T) {
	pin := &partitionPin{}
	p := controlPartitioner{inner: kgo.StickyKeyPartitioner(nil), topic: "t", pin: pin}.ForTopic("t")
	plain := kgo.StickyKeyPartitioner(nil).ForTopic("t")
	for i := range int32(6) {
		r := &kgo.Record{Partition: i, Headers: []kgo.RecordHeader{{Key: watermarkHeader, Value: encodeWatermark("w", 1, false)}}}
		if got := p.Partition(r, 6); got != int(i) || !p.RequiresConsistency(r) {
			t.Errorf("control record for partition %d went to %d (consistent %v)", i, got, p.RequiresConsistency(r))
		}
	}
	for _, k := range []string{"a", "b", "order-17", "x"} {
		r := &kgo.Record{Key: []byte(k)}
		if got, want := p.Partition(r, 6), plain.Partition(r, 6); got != want {
			t.Errorf("key %q went to %d, Kafka's partitioner says %d", k, got, want)
		}
	}
	if pinned, now := pin.changed(); pinned != 0 || now != 0 {
		t.Errorf("an unpinned partitioner noted counts %d, %d", pinned, now)
	}
	pin.open(kadm.TopicID{1}, 4)
	for _, k := range []string{"a", "b", "order-17", "x"} {
		r := &kgo.Record{Key: []byte(k)}
		if got, want := p.Partition(r, 6), plain.Partition(r, 4); got != want {
			t.Errorf("key %q went to %d of 6 partitions, want %d: the count is pinned at 4", k, got, want)
		}
	}
	if pinned, now := pin.changed(); pinned != 4 || now != 6 {
		t.Errorf("pin.changed() = %d, %d, want 4, 6", pinned, now)
	}
}

// TestPositionKeepsUpstreamMarks: a split's checkpointed position holds
// what every upstream writer said, so that a restore knows a writer that
// will not write again (finished at the end of event time, or idle): with
// only the watermark as a floor, a restored partition waited for ever to
// hear from a finished writer. Damaged marks are an error.
func TestPositionKeepsUpstreamMarks(t *testing.T) {
	u := newUpstreamWatermarks(2)
	for w, m := range map[string]upstreamMark{"up.0/mid/0": {wm: math.MaxInt64}, "up.1/mid/0": {wm: 40, idle: true}} {
		if err := u.heard(w, m); err != nil {
			t.Fatal(err)
		}
	}
	r := &reader[string]{next: 17, end: -1, upstream: u}
	pos := r.Position()
	next, end, marks, err := decodePosition("mid/0", pos)
	if err != nil || next != 17 || end != -1 || len(marks) != 2 {
		t.Fatalf("decodePosition(%x) = %d %d %v %v", pos, next, end, marks, err)
	}
	restored, err := restoreUpstreamWatermarks(2, marks)
	if err != nil {
		t.Fatal(err)
	}
	if wm, idle := restored.watermark(); wm != math.MaxInt64 || idle {
		t.Fatalf("restored watermark %d idle %v, want the end of event time, not idle", wm, idle)
	}
	if _, err := restoreUpstreamWatermarks(1, marks); err == nil || !strings.Contains(err.Error(), "SourceOptions.Upstreams = 1") {
		t.Fatalf("restoring 2 writers' marks with Upstreams 1: %v", err)
	}
	for _, cut := range []int{len(pos) - 1, len(pos) - 9, 20, 18, 17} {
		if _, _, _, err := decodePosition("mid/0", pos[:cut]); err == nil {
			t.Errorf("a position cut to %d of %d bytes decoded", cut, len(pos))
		}
	}
	// A writer id length near 2^64 must not wrap the bounds check.
	huge := append(append(slices.Clone(pos[:16]), positionMarks...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 'w')
	if _, _, _, err := decodePosition("mid/0", huge); err == nil {
		t.Error("a position with a writer id of 2^64-1 bytes decoded")
	}
	// A position of the first format (positionMarksV1, without the marks
	// read since each writer's) reads as if every writer had just been
	// heard.
	v1 := append(append(slices.Clone(pos[:16]), positionMarksV1...), 10)
	v1 = append(append(v1, "up.1/mid/0"...), 1, 0, 0, 0, 0, 0, 0, 0, 40)
	if _, _, m, err := decodePosition("mid/0", v1); err != nil || m["up.1/mid/0"] != (upstreamMark{wm: 40, idle: true}) {
		t.Errorf("decodePosition of a wm1 position: marks %v, %v", m, err)
	}
	// One of the second (positionMarksV2, without the holds) as holding
	// nothing.
	v2 := append(append(slices.Clone(pos[:16]), positionMarksV2...), 10)
	v2 = append(append(v2, "up.1/mid/0"...), 1, 0, 0, 0, 0, 0, 0, 0, 40, 3)
	if _, _, m, err := decodePosition("mid/0", v2); err != nil || m["up.1/mid/0"] != (upstreamMark{wm: 40, idle: true, since: 3}) {
		t.Errorf("decodePosition of a wm2 position: marks %v, %v", m, err)
	}
	// Positions without marks read as before.
	for _, p := range [][]byte{nil, pos[:8], pos[:16]} {
		if _, _, m, err := decodePosition("mid/0", p); err != nil || m != nil {
			t.Errorf("decodePosition(%x): marks %v, %v", p, m, err)
		}
	}
}

// TestPositionKeepsSilence checks that a restored reader knows how long
// each writer has been silent: an idle writer that stopped writing before
// the checkpoint must not count as idle again after the restore.
func TestPositionKeepsSilence(t *testing.T) {
	u := newUpstreamWatermarks(2)
	if err := u.heard("b", upstreamMark{wm: 10, idle: true}); err != nil {
		t.Fatal(err)
	}
	for wm := range int64(5) {
		if err := u.heard("a", upstreamMark{wm: 20 + wm}); err != nil {
			t.Fatal(err)
		}
	}
	if _, idle := u.watermark(); idle || u.isIdle(u.marks["b"]) {
		t.Fatalf("b silent for 5 marks of a counts as idle")
	}
	restored := restoredThroughPosition(t, u)
	if restored.isIdle(restored.marks["b"]) || restored.marks["b"].since != u.marks["b"].since {
		t.Fatalf("restored b: %+v, want %+v (silent, not idle)", restored.marks["b"], u.marks["b"])
	}
	// The engine resumes the checkpointed watermark as the floor; the
	// marks alone give b's, which holds the partition back.
	if wm, _ := restored.watermark(); wm != 10 {
		t.Fatalf("restored watermark %d, want b's (10)", wm)
	}
}

// TestPositionKeepsHolds checks that a restored reader knows which idle
// writers hold the partition after another one resumed, and for how many
// marks more.
func TestPositionKeepsHolds(t *testing.T) {
	u := newUpstreamWatermarks(2)
	for _, s := range []struct {
		w    string
		wm   int64
		idle bool
	}{{"a", 10, true}, {"b", 10, true}, {"a", 20, false}, {"a", 30, false}} {
		if err := u.heard(s.w, upstreamMark{wm: s.wm, idle: s.idle}); err != nil {
			t.Fatal(err)
		}
	}
	if b := u.marks["b"]; b.hold != 2 || u.isIdle(b) {
		t.Fatalf("b after a resumed and wrote again: %+v, want holding (hold 2)", b)
	}
	restored := restoredThroughPosition(t, u)
	if restored.marks["b"] != u.marks["b"] {
		t.Fatalf("restored b: %+v, want %+v", restored.marks["b"], u.marks["b"])
	}
	if wm, _ := restored.watermark(); wm != 10 {
		t.Fatalf("restored watermark %d, want b's (10): b holds", wm)
	}
}

// restoredThroughPosition returns u as a reader restores it from the
// position of a split that u's reader checkpointed.
func restoredThroughPosition(t *testing.T, u *upstreamWatermarks) *upstreamWatermarks {
	t.Helper()
	r := &reader[string]{next: 3, end: -1, upstream: u}
	_, _, marks, err := decodePosition("mid/0", r.Position())
	if err != nil {
		t.Fatal(err)
	}
	restored, err := restoreUpstreamWatermarks(u.want, marks)
	if err != nil {
		t.Fatal(err)
	}
	return restored
}
