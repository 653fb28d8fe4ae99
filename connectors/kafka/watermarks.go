package kafka

import (
	"encoding/binary"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Watermarks between two jobs (stages) that a Kafka topic connects.
//
// An upstream sink with SinkOptions.Watermarks writes, in each of its
// transactions once its input has a watermark (moved or not: a reader
// that starts after retention removed the older marks hears every live
// writer within one checkpoint), one control record into every partition
// of its topic, by the pinned partition count (partitionPin): no key, no
// value, and
// the header watermarkHeader, whose value is
//
//	byte 0     version (1)
//	byte 1     flags: bit 0 set when the writer's input is idle
//	bytes 2-9  the watermark, int64 big-endian, nanoseconds since the epoch
//	bytes 10-  the writer's id, "<job>/<sink>/<subtask>"
//
// The control record follows every record the transaction wrote before
// it, so a read_committed reader of the partition has read everything the
// writer wrote at or before the watermark when it reads the watermark. A
// downstream source with SourceOptions.Upstreams takes, per partition, the
// least watermark of the writers that are not idle, and none until it has
// heard from every writer it expects (upstreamWatermarks). An idle writer
// that falls silent (killed, paused, failing its checkpoints) holds the
// partition back again once the others wrote staleRounds rounds of marks
// after its last, and every idle writer holds it for resumeRounds rounds
// when another one turns active (see upstreamWatermarks.isIdle). Control
// records are never handed to the Deserializer, whatever the source's
// options.
const watermarkHeader = "exactly-watermark"

// watermarkVersion is the first byte of a watermark header's value.
const watermarkVersion = 1

// encodeWatermark returns a watermark header's value.
func encodeWatermark(writer string, wm int64, idle bool) []byte {
	b := make([]byte, 10, 10+len(writer))
	b[0] = watermarkVersion
	if idle {
		b[1] = 1
	}
	binary.BigEndian.PutUint64(b[2:], uint64(wm))
	return append(b, writer...)
}

// upstreamMark is what one upstream writer said last.
type upstreamMark struct {
	wm   int64
	idle bool
	// since counts the marks of the partition's other writers read after
	// this one, up to staleness + 1: the reader's bookkeeping, not part
	// of the header.
	since uint64
	// hold, for an idle writer, counts the marks of the other writers
	// read since one of them turned active while this one was idle, up
	// to holdLimit + 1; 0 when none did. The reader's bookkeeping too.
	hold uint64
}

// decodeWatermark parses a watermark header's value.
func decodeWatermark(v []byte) (writer string, m upstreamMark, err error) {
	switch {
	case len(v) < 11:
		return "", m, fmt.Errorf("header %s is %d bytes, want at least 11", watermarkHeader, len(v))
	case v[0] != watermarkVersion:
		return "", m, fmt.Errorf("header %s has version %d, this build reads version %d: upgrade the job to the version of its upstream", watermarkHeader, v[0], watermarkVersion)
	case v[1]&^1 != 0:
		return "", m, fmt.Errorf("header %s has unknown flags %#x", watermarkHeader, v[1])
	}
	return string(v[10:]), upstreamMark{wm: int64(binary.BigEndian.Uint64(v[2:10])), idle: v[1]&1 != 0}, nil
}

// controlWatermark returns the value of r's watermark header, if r is a
// control record: no key, no value, the header, and no other but the
// ReproducesHeader of a reproduced one (SinkOptions.ReproduceAborted).
func controlWatermark(r *kgo.Record) ([]byte, bool) {
	if len(r.Headers) == 0 || len(r.Headers) > 2 || r.Headers[0].Key != watermarkHeader || r.Key != nil || len(r.Value) != 0 {
		return nil, false
	}
	if len(r.Headers) == 2 && r.Headers[1].Key != ReproducesHeader {
		return nil, false
	}
	return r.Headers[0].Value, true
}

// upstreamWatermarks is the watermark of one partition written by several
// upstream writers: the least of the watermarks of the writers that are
// not idle, or the greatest when all are idle (the partition is idle
// then), and MinWatermark until every one of the want writers has been
// heard from. It never goes back, nor below floor, the watermark a restore
// resumes at. It is a pure state machine.
//
// A writer's idleness holds only while the writer keeps saying so: every
// live writer writes a mark in every checkpoint, idle or not. One that
// said it was idle and then fell silent for staleRounds rounds of the
// other writers' marks counts as not idle, at its last watermark, until it
// writes again. Without that, a writer paused or killed while idle stayed
// idle to the reader for as long as it was gone: the other writers moved
// the watermark on, and the records its successor read from its input once
// it took over were late (a cluster test lost 6 window records so, its
// input paused while an instance was SIGSTOPped; docs/kafka.md).
//
// And an idle writer holds the partition at its watermark for
// resumeRounds rounds of the other writers' marks once one of them turns
// active again: when the input of every writer paused and resumes, the
// writers turn active one by one, a checkpoint or more apart, and the
// first one must not carry the watermark past the records the others are
// about to write (a cluster test lost the first rounds of a phase of its
// input so, at a load average of 10; docs/kafka.md). A writer that stays
// idle through its hold is not held again until it has been active: an
// input with no records at all delays the watermark once, by that many
// rounds, after it went idle.
//
// Both counts are of marks in the partition, not of time, so a restored
// reader that reads the same records decides the same.
type upstreamWatermarks struct {
	want  int
	floor int64
	marks map[string]upstreamMark
	enc   []byte // the marks as appendMarks appends them; nil when stale
}

// staleRounds is how many rounds of marks of the other writers (one each
// per checkpoint) an idle writer may miss before it holds the partition
// back again. A live idle writer whose checkpoints lag that much only
// delays the watermark until its next mark.
const staleRounds = 3

// staleness is how many marks of the other writers an idle writer may
// miss: staleRounds of each other writer's.
func (u *upstreamWatermarks) staleness() uint64 { return staleRounds * uint64(max(u.want-1, 0)) }

// resumeRounds is how many rounds of marks of the other writers an idle
// writer holds the partition for after another writer turned active. A
// writer whose input resumed turns active within that many checkpoints of
// the others, unless its checkpoints lag by more.
const resumeRounds = 5

// holdLimit is how many marks of the other writers an idle writer holds
// the partition for: resumeRounds of each other writer's.
func (u *upstreamWatermarks) holdLimit() uint64 { return resumeRounds * uint64(max(u.want-1, 0)) }

// isIdle reports whether m, a writer's last mark, lets the partition's
// watermark pass the writer by: the writer said it was idle, the other
// writers have not written more than staleness marks since, and it is not
// holding the partition after another writer turned active.
func (u *upstreamWatermarks) isIdle(m upstreamMark) bool {
	return m.idle && m.since <= u.staleness() && !u.holding(m)
}

// holding reports whether m is within its hold.
func (u *upstreamWatermarks) holding(m upstreamMark) bool {
	return m.hold > 0 && m.hold <= u.holdLimit()
}

func newUpstreamWatermarks(want int) *upstreamWatermarks {
	return &upstreamWatermarks{want: want, floor: math.MinInt64, marks: map[string]upstreamMark{}}
}

// restoreUpstreamWatermarks returns the watermark of a partition whose
// checkpointed position held marks (nil when it held none): a writer that
// will not write again (finished, or idle and unchanged) is known as it
// was, instead of holding the watermark back for ever.
func restoreUpstreamWatermarks(want int, marks map[string]upstreamMark) (*upstreamWatermarks, error) {
	u := newUpstreamWatermarks(want)
	if len(marks) > want {
		writers := slices.Sorted(maps.Keys(marks))
		return nil, fmt.Errorf("watermarks from %d writers (%s), but SourceOptions.Upstreams = %d: set Upstreams to the number of writers of the upstream job (its tasks times its sink's parallelism)",
			len(writers), strings.Join(writers, ", "), want)
	}
	maps.Copy(u.marks, marks)
	u.floor = max(u.floor, u.current())
	return u, nil
}

// positionMarks starts, after the 16 bytes of offset and end offset, the
// marks of the upstream writers in a position of a source with
// SourceOptions.Upstreams: then, per writer in order of id, the id's
// length (uvarint), the id, the flags byte and the watermark (8 bytes
// big-endian), as in the header, the marks of other writers read since
// (uvarint, upstreamMark.since) and the writer's hold (uvarint,
// upstreamMark.hold). positionMarksV2, written before the hold was, reads
// as holding nothing; positionMarksV1, written before since was, also as
// if every writer had just been heard.
const (
	positionMarks   = "wm3"
	positionMarksV2 = "wm2"
	positionMarksV1 = "wm1"
)

// appendMarks appends the writers' marks to a position. The engine asks
// for the position after every read: the encoding is kept until a mark
// changes.
func (u *upstreamWatermarks) appendMarks(pos []byte) []byte {
	if u.enc == nil {
		u.enc = []byte(positionMarks)
		for _, w := range slices.Sorted(maps.Keys(u.marks)) {
			m := u.marks[w]
			u.enc = binary.AppendUvarint(u.enc, uint64(len(w)))
			u.enc = append(u.enc, w...)
			var flags byte
			if m.idle {
				flags = 1
			}
			u.enc = binary.BigEndian.AppendUint64(append(u.enc, flags), uint64(m.wm))
			u.enc = binary.AppendUvarint(u.enc, m.since)
			u.enc = binary.AppendUvarint(u.enc, m.hold)
		}
	}
	return append(pos, u.enc...)
}

// parseMarks parses what appendMarks appended after a position's marks
// prefix of version (1, 2 or 3: positionMarksV1, positionMarksV2,
// positionMarks).
func parseMarks(b []byte, version int) (map[string]upstreamMark, error) {
	marks := map[string]upstreamMark{}
	for len(b) > 0 {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) || uint64(len(b)-k)-n < 9 {
			return nil, fmt.Errorf("the watermarks of the upstream writers are truncated")
		}
		w := string(b[k : k+int(n)])
		b = b[k+int(n):]
		if b[0]&^1 != 0 {
			return nil, fmt.Errorf("the watermark of upstream writer %q has unknown flags %#x", w, b[0])
		}
		m := upstreamMark{idle: b[0]&1 != 0, wm: int64(binary.BigEndian.Uint64(b[1:9]))}
		b = b[9:]
		counts := []*uint64{&m.since, &m.hold}[:version-1]
		for _, c := range counts {
			v, k := binary.Uvarint(b)
			if k <= 0 {
				return nil, fmt.Errorf("the watermarks of the upstream writers are truncated")
			}
			*c, b = v, b[k:]
		}
		marks[w] = m
	}
	return marks, nil
}

// heard records what writer said, and that the others did not: their
// silence and their holds grow by one mark, and when writer turned active
// after saying it was idle, every other idle writer not held since it was
// last active starts holding the partition. A writer's watermark never
// goes back; a writer more than want is an error naming them all.
func (u *upstreamWatermarks) heard(writer string, m upstreamMark) error {
	old, known := u.marks[writer]
	if !known && len(u.marks) == u.want {
		writers := slices.Sorted(maps.Keys(u.marks))
		return fmt.Errorf("watermarks from writer %q and %d others (%s), but SourceOptions.Upstreams = %d: set Upstreams to the number of writers of the upstream job (its tasks times its sink's parallelism)",
			writer, len(writers), strings.Join(writers, ", "), u.want)
	}
	resumed := known && old.idle && !m.idle
	if known {
		m.wm = max(m.wm, old.wm)
		if m.idle {
			m.hold = old.hold // idle again: a hold goes on, and one spent is not renewed
		}
	}
	m.since = 0
	if !known || m != old {
		u.marks[writer], u.enc = m, nil
	}
	for w, o := range u.marks {
		if w == writer {
			continue
		}
		n := o
		if n.since <= u.staleness() {
			n.since++
		}
		switch {
		case u.holding(n):
			n.hold++
		case resumed && n.idle && n.hold == 0 && u.holdLimit() > 0:
			n.hold = 1
		}
		if n != o {
			u.marks[w], u.enc = n, nil
		}
	}
	u.floor = max(u.floor, u.current())
	return nil
}

// resume raises the floor to wm.
func (u *upstreamWatermarks) resume(wm int64) { u.floor = max(u.floor, wm) }

// watermark returns the partition's watermark and whether it is idle.
func (u *upstreamWatermarks) watermark() (int64, bool) {
	if len(u.marks) < u.want {
		return u.floor, false
	}
	return u.floor, u.allIdle()
}

// current is the watermark the writers' marks give, MinWatermark until
// every writer has been heard from.
func (u *upstreamWatermarks) current() int64 {
	if len(u.marks) < u.want {
		return math.MinInt64
	}
	least, greatest := int64(math.MaxInt64), int64(math.MinInt64)
	for _, m := range u.marks {
		greatest = max(greatest, m.wm)
		if !u.isIdle(m) {
			least = min(least, m.wm)
		}
	}
	if u.allIdle() {
		return greatest
	}
	return least
}

func (u *upstreamWatermarks) allIdle() bool {
	for _, m := range u.marks {
		if !u.isIdle(m) {
			return false
		}
	}
	return len(u.marks) > 0
}

// controlPartitioner is the sink's partitioner with SinkOptions.Watermarks:
// a control record goes to the partition it names, every other record
// where the inner partitioner puts it; in topic, by the pinned partition
// count (partitionPin).
type controlPartitioner struct {
	inner kgo.Partitioner
	topic string
	pin   *partitionPin
}

// ForTopic implements kgo.Partitioner.
func (p controlPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	tp := controlTopicPartitioner{inner: p.inner.ForTopic(topic)}
	if topic == p.topic {
		tp.pin = p.pin
	}
	return tp
}

type controlTopicPartitioner struct {
	inner kgo.TopicPartitioner
	pin   *partitionPin // nil but in the pinned topic
}

func (p controlTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	_, control := controlWatermark(r)
	return control || p.inner.RequiresConsistency(r)
}

func (p controlTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if p.pin != nil {
		n = p.pin.partitionBy(n)
	}
	if _, control := controlWatermark(r); control {
		return int(r.Partition)
	}
	return p.inner.Partition(r, n)
}

// OnNewBatch passes the new batch on to a sticky inner partitioner.
func (p controlTopicPartitioner) OnNewBatch() {
	if nb, ok := p.inner.(kgo.TopicPartitionerOnNewBatch); ok {
		nb.OnNewBatch()
	}
}

// marksVersion returns the version of a position's marks prefix, 0 when
// it is none.
func marksVersion(prefix []byte) int {
	switch string(prefix) {
	case positionMarksV1:
		return 1
	case positionMarksV2:
		return 2
	case positionMarks:
		return 3
	}
	return 0
}
