package runtime

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// TestRouterCountsBackpressure checks that a router counts the time it
// waits for room in a full channel, and only that: a send into a channel
// with room counts nothing. The fake clock of a synctest bubble makes the
// wait exactly one second.
func TestRouterCountsBackpressure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, outs := channels(1, 1)
		var waited atomic.Int64
		r := NewRouter[int](withBackpressure(context.Background(), &waited), Forward, outs, 1, 128, nil)
		if err := r.Emit([]int{1}); err != nil {
			t.Fatal(err)
		}
		if waited.Load() != 0 {
			t.Fatalf("a send into a channel with room counted %v of backpressure", time.Duration(waited.Load()))
		}
		done := make(chan error)
		go func() { done <- r.Emit([]int{2}) }()
		synctest.Wait() // the router waits on the full channel
		time.Sleep(time.Second)
		<-cs[0]
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(waited.Load()); got != time.Second {
			t.Fatalf("backpressure %v, want the 1s the router waited", got)
		}
		// A router built without the counter counts nothing and still works.
		<-cs[0]
		plain := NewRouter[int](context.Background(), Forward, outs, 1, 128, nil)
		if err := plain.Emit([]int{3}); err != nil {
			t.Fatal(err)
		}
	})
}
