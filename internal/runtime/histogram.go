package runtime

import (
	"sync/atomic"
	"time"
)

// CheckpointDurationBuckets are the upper bounds of the buckets of
// Metrics.CheckpointDurations.
var CheckpointDurationBuckets = [...]time.Duration{
	10 * time.Millisecond, 25 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond,
	250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2500 * time.Millisecond,
	5 * time.Second, 10 * time.Second, 30 * time.Second, time.Minute,
}

// DurationHistogram counts durations in the buckets of
// CheckpointDurationBuckets, safe for concurrent use.
type DurationHistogram struct {
	counts [len(CheckpointDurationBuckets) + 1]atomic.Uint64 // the last: above every bound
	sum    atomic.Int64                                      // nanoseconds
}

// Observe counts d.
func (h *DurationHistogram) Observe(d time.Duration) {
	i := 0
	for i < len(CheckpointDurationBuckets) && d > CheckpointDurationBuckets[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sum.Add(int64(d))
}

// Snapshot returns, per bound of CheckpointDurationBuckets, the number of
// durations at or below it, then the number of durations and their sum.
func (h *DurationHistogram) Snapshot() (cumulative []uint64, count uint64, sum time.Duration) {
	cumulative = make([]uint64, len(CheckpointDurationBuckets))
	for i := range h.counts {
		count += h.counts[i].Load()
		if i < len(cumulative) {
			cumulative[i] = count
		}
	}
	return cumulative, count, time.Duration(h.sum.Load())
}
