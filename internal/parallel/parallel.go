// Package parallel runs numbered calls a bounded number at a time.
package parallel

import (
	"sync"
	"sync/atomic"
)

// Each calls do(0), …, do(n-1), at most limit of them at a time, and
// starts no call once one failed. It returns when every started call
// returned, with each call's error at its index (nil for a call that
// succeeded or never started).
func Each(n, limit int, do func(i int) error) []error {
	errs := make([]error, n)
	var (
		next   atomic.Int64
		failed atomic.Bool
		wg     sync.WaitGroup
	)
	for range min(n, max(limit, 1)) {
		wg.Go(func() {
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if errs[i] = do(i); errs[i] != nil {
					failed.Store(true)
				}
			}
		})
	}
	wg.Wait()
	return errs
}
