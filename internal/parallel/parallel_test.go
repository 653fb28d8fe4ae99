package parallel

import (
	"errors"
	"sync/atomic"
	"testing"
)

// TestEach: every call runs once, never more than limit at a time, and
// after a failure no call starts; the errors stand at their indexes.
func TestEach(t *testing.T) {
	var running, most, calls atomic.Int64
	block := make(chan struct{})
	go func() {
		for running.Load() < 3 {
		}
		close(block)
	}()
	errs := Each(10, 3, func(i int) error {
		calls.Add(1)
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-block
		return nil
	})
	if calls.Load() != 10 || most.Load() > 3 || len(errs) != 10 {
		t.Fatalf("10 calls at most 3 at a time: %d calls, %d at once, %d errors", calls.Load(), most.Load(), len(errs))
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}

	boom := errors.New("boom")
	calls.Store(0)
	errs = Each(100, 1, func(i int) error {
		calls.Add(1)
		if i == 4 {
			return boom
		}
		return nil
	})
	if calls.Load() != 5 || errs[4] != boom || errs[3] != nil || errs[5] != nil {
		t.Fatalf("one at a time, call 4 failing: %d calls, errors %v", calls.Load(), errs[:6])
	}
}
