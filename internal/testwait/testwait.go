// Package testwait lets a test wait for a job to get somewhere — n
// checkpoints completed, n records written or committed — on a
// notification from the job's own callbacks (its Probe, a test sink or
// source), instead of polling a metric with time.Sleep.
//
// Inside a testing/synctest bubble a wait on [Counter.Reached] is durable
// blocking, so the fake clock moves on while the job works; the channel is
// made by Reached, in the caller's bubble. Outside one, bound the wait with
// [For], whose timeout is a guard against a hang, not a timing assertion.
package testwait

import (
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/runtime"
)

// Counter is a count that tests wait on. Its zero value is ready to use;
// it is safe for concurrent use.
type Counter struct {
	mu    sync.Mutex
	n     int64
	waits []waiter
}

type waiter struct {
	at int64
	ch chan struct{}
}

// Add adds k to the count and wakes the waits it satisfies.
func (c *Counter) Add(k int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += k
	kept := c.waits[:0]
	for _, w := range c.waits {
		if c.n >= w.at {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	c.waits = kept
}

// Load returns the count.
func (c *Counter) Load() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// Reached returns a channel that is closed once the count is at least n
// (at once if it is already).
func (c *Counter) Reached(n int64) <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan struct{})
	if c.n >= n {
		close(ch)
	} else {
		c.waits = append(c.waits, waiter{at: n, ch: ch})
	}
	return ch
}

// Checkpoints returns a Probe for a job's options that counts in c every
// checkpoint and savepoint it completes (at [runtime.ProbeMetadataWritten],
// just before the job's Completed metric counts it), then calls next, when
// it is not nil.
func Checkpoints(c *Counter, next func(runtime.ProbePoint, checkpoint.ID)) func(runtime.ProbePoint, checkpoint.ID) {
	return func(p runtime.ProbePoint, id checkpoint.ID) {
		if p == runtime.ProbeMetadataWritten {
			c.Add(1)
		}
		if next != nil {
			next(p, id)
		}
	}
}

// For waits until ch is closed, or fails t after timeout with what the
// test waited for and, if describe is not nil, what it found.
func For(t testing.TB, ch <-chan struct{}, timeout time.Duration, what string, describe func() string) {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-ch:
	case <-timer.C:
		found := ""
		if describe != nil {
			found = ": " + describe()
		}
		t.Fatalf("waited %v for %s%s", timeout, what, found)
	}
}
