package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// check runs the configuration checks of the graph's operators
// (OperatorSpec.Check) concurrently, each bounded by timeout, and returns
// every failure, each naming its operator: a user fixing a pipeline sees
// all that is wrong at once. A negative timeout skips the checks.
func (g *Graph) check(ctx context.Context, timeout time.Duration) error {
	if timeout < 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	errs := make([]error, len(g.Operators))
	var wg sync.WaitGroup
	for i, op := range g.Operators {
		if op.Check == nil {
			continue
		}
		wg.Go(func() {
			if err := op.Check(ctx); err != nil {
				if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
					err = fmt.Errorf("no answer within %v (Options.CheckTimeout): %w", timeout, err)
				}
				errs[i] = fmt.Errorf("exactly: job %q: operator %q cannot start: %w", g.Job, op.Name, err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
