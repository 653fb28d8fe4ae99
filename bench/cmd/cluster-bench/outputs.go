package main

import (
	"slices"
	"sync"
	"time"
)

// arrivals records when a read_committed consumer received output of each
// output partition: at most one time per partition per poll.
type arrivals struct {
	mu sync.Mutex
	at map[int32][]time.Time
}

func newArrivals() *arrivals { return &arrivals{at: map[int32][]time.Time{}} }

// add records that partition p had new output at t.
func (a *arrivals) add(p int32, t time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ts := a.at[p]; len(ts) > 0 && !t.After(ts[len(ts)-1]) {
		return
	}
	a.at[p] = append(a.at[p], t)
}

// snapshot returns a copy of the arrivals so far.
func (a *arrivals) snapshot() map[int32][]time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := make(map[int32][]time.Time, len(a.at))
	for p, ts := range a.at {
		m[p] = slices.Clone(ts)
	}
	return m
}

// allAfter returns the earliest time by which every partition of
// partitions had output after t, and whether all had.
func allAfter(at map[int32][]time.Time, partitions int32, t time.Time) (time.Time, bool) {
	var last time.Time
	for p := range partitions {
		ts := at[p]
		i, _ := slices.BinarySearchFunc(ts, t, func(a, b time.Time) int { return a.Compare(b) })
		for i < len(ts) && !ts[i].After(t) {
			i++
		}
		if i == len(ts) {
			return time.Time{}, false
		}
		if ts[i].After(last) {
			last = ts[i]
		}
	}
	return last, true
}

// longestGap returns the longest time any partition of partitions went
// without output within [from, to]: between two arrivals, from from to
// the first, or from the last to to.
func longestGap(at map[int32][]time.Time, partitions int32, from, to time.Time) time.Duration {
	var longest time.Duration
	for p := range partitions {
		prev := from
		for _, t := range at[p] {
			if t.Before(from) {
				continue
			}
			if t.After(to) {
				break
			}
			longest = max(longest, t.Sub(prev))
			prev = t
		}
		longest = max(longest, to.Sub(prev))
	}
	return longest
}
