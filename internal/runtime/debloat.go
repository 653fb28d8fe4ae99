package runtime

import (
	"sync/atomic"
	"time"
)

// debloater is a task's buffer debloating (Options.DebloatTarget): it
// measures how many records the task processes per second of work (the
// operators' processing of each input batch and the sending of what it
// emits, waits for room downstream included) and publishes the batch size
// at which its input channels, ChannelCapacity batches each, hold about
// target of that work together. The routers of its producers send their batches
// at that size (router.limit), so that a barrier queued behind them
// waits about target, not ChannelCapacity full batches.
type debloater struct {
	target    time.Duration
	batches   int           // ChannelCapacity times the input channels
	batchSize int           // the largest batch
	limit     *atomic.Int64 // read by the producers' routers

	records int64         // records processed in the current window
	worked  time.Duration // the time it took
}

// debloatWindow is the least work over which a debloater measures before
// it publishes a new limit: short enough to follow a sink that slows
// down within a checkpoint interval, long enough to average batches.
const debloatWindow = 50 * time.Millisecond

func newDebloater(target time.Duration, batches, batchSize int) *debloater {
	d := &debloater{target: target, batches: batches, batchSize: batchSize, limit: new(atomic.Int64)}
	d.limit.Store(int64(batchSize))
	return d
}

// processed records that the task took worked to process a batch of n
// records, and publishes a new limit once a window's worth was measured.
func (d *debloater) processed(n int, worked time.Duration) {
	d.records += int64(n)
	d.worked += worked
	if d.worked < debloatWindow {
		return
	}
	perSecond := float64(d.records) / d.worked.Seconds()
	size := int(perSecond * d.target.Seconds() / float64(d.batches))
	d.limit.Store(int64(min(d.batchSize, max(minBatchCap, size))))
	d.records, d.worked = 0, 0
}
