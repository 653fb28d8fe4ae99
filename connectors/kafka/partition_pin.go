package kafka

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/exactlyonce/exactly/sink"
)

// partitionPin is the partition count of SinkOptions.Topic that a sink
// with Watermarks (an upstream stage writing a repartition topic)
// partitions its records and writes its watermarks by: the topic's count
// when the sink first wrote it, for that incarnation of the topic (its
// topic id: a topic deleted and created again is another topic). Every
// committable carries it, so that a restore knows it too.
//
// Kafka's partitioner spreads keys over the topic's current count, and
// each of the sink's transactions has a new client with fresh metadata: a
// partition added while the job runs would take some keys at once, and
// their downstream state would split between the task of the old
// partition and that of the new one, which hears no watermark either (the
// writers write marks into the partitions they know). So the producers
// partition by the pinned count only, and a count that differs, seen by a
// producer or found at a writer's open, fails the job with a permanent
// error (pinRefusal).
type partitionPin struct {
	mu    sync.Mutex
	id    kadm.TopicID
	count atomic.Int32 // 0: not pinned yet
	// seen is a count other than count that a producer's metadata showed;
	// 0 while none was.
	seen atomic.Int32
}

// pinRecord is a pin as a committable carries it.
type pinRecord struct {
	TopicID    []byte `json:"id"` // 16 bytes
	Partitions int32  `json:"n"`
}

// open pins the count of topic id at a writer's open, unless it is pinned
// for that topic already: then the count must be the same.
func (p *partitionPin) open(id kadm.TopicID, count int32) (pinned int32, changed bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if old := p.count.Load(); old != 0 && p.id == id {
		return old, old != count
	}
	p.id = id
	p.count.Store(count)
	p.seen.Store(0)
	return count, false
}

// restore pins what a restored committable recorded, unless a pin is set.
func (p *partitionPin) restore(r pinRecord) {
	var id kadm.TopicID
	if len(r.TopicID) != len(id) || r.Partitions <= 0 {
		return // a malformed record pins nothing; the writer pins at its open
	}
	copy(id[:], r.TopicID)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.count.Load() == 0 {
		p.id = id
		p.count.Store(r.Partitions)
	}
}

// record returns the pin for a committable.
func (p *partitionPin) record() *pinRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	return &pinRecord{TopicID: p.id[:], Partitions: p.count.Load()}
}

// partitionBy returns the count to partition a record by, given the
// count n of the producer's metadata, and notes a count that differs.
func (p *partitionPin) partitionBy(n int) int {
	pinned := int(p.count.Load())
	if pinned == 0 {
		return n
	}
	if n != pinned {
		p.seen.CompareAndSwap(0, int32(n))
	}
	return min(n, pinned)
}

// changed returns the count a producer saw that differs from the pinned
// one, or 0.
func (p *partitionPin) changed() (pinned, now int32) {
	return p.count.Load(), p.seen.Load()
}

// pinRefusal is the permanent error of a repartition topic whose count
// changed while its job ran.
func pinRefusal(sinkName, topic string, pinned, now int32) error {
	return sink.Permanent(fmt.Errorf("kafka: sink %q: topic %q has %d partitions, but this job partitions its records and watermarks by the %d partitions the topic had when the job first wrote it (SinkOptions.Watermarks: a repartition topic between stages): "+
		"a repartition topic must not gain partitions while its job runs, or keys move to the new partitions, their state splits between two downstream tasks, and the new partitions' tasks hear no watermark. "+
		"Kafka cannot remove partitions: recreate the topic (delete it, create it with the count the stages need), start the downstream stage afresh (its state and offsets belong to the old topic), then the upstream stage again; see docs/scale-out.md, \"Repartition topics keep their partition count\"",
		sinkName, topic, now, pinned))
}
