package runtime

import (
	"context"
	"fmt"
)

// savepointRequest asks the driver for a savepoint, and to stop after it
// when stop is set.
type savepointRequest struct {
	stop  bool
	reply chan savepointResult
}

// savepointResult answers a savepointRequest: the savepoint's directory.
type savepointResult struct {
	path string
	err  error
}

// Savepoint takes a savepoint and returns its directory. The job goes on.
func (j *Job) Savepoint(ctx context.Context) (string, error) {
	return j.savepoint(ctx, false)
}

// StopWithSavepoint takes a savepoint, commits its output and stops the job;
// [Job.Wait] then returns nil. It returns the savepoint's directory.
func (j *Job) StopWithSavepoint(ctx context.Context) (string, error) {
	return j.savepoint(ctx, true)
}

func (j *Job) savepoint(ctx context.Context, stop bool) (string, error) {
	req := savepointRequest{stop: stop, reply: make(chan savepointResult, 1)}
	select {
	case j.requests <- req:
	case <-j.ended:
		return "", fmt.Errorf("savepoint: the job has ended: %v", j.err)
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case r := <-req.reply:
		return r.path, r.err
	case <-j.ended:
		return "", fmt.Errorf("savepoint: the job ended before the savepoint completed: %v", j.err)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}
