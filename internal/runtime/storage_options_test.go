package runtime_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/internal/s3test"
	"github.com/exactlyonce/exactly/stream"
)

// TestStorageTimeoutsReachTheObjectStore checks that the job's options of
// object storage reach the store (issue 27, case 2: the store's timeouts
// were fixed, whatever the job said): with a request timeout of a
// nanosecond and a transfer rate no link reaches, every request of the
// start to the S3 server fails on its deadline, and the start, which
// retries through an outage, does not succeed within 3 s; with the
// defaults, the same job runs there.
func TestStorageTimeoutsReachTheObjectStore(t *testing.T) {
	location := s3test.Location(t, "storage-options")
	ctx := context.Background()
	out := &txSink{prepared: map[string][]int{}, done: map[string]bool{}}
	short, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	r, err := intsJob(100, out).Start(short, stream.Options{CheckpointDir: location, StorageRequestTimeout: time.Nanosecond, StorageMinTransferRate: 1 << 40})
	if err == nil {
		err = r.Wait()
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a run with a request timeout of 1ns: %v, want a deadline exceeded", err)
	}
	if err := intsJob(100, out).Run(ctx, stream.Options{CheckpointDir: location, CheckpointInterval: 20 * time.Millisecond}); err != nil {
		t.Fatalf("with the default timeouts: %v", err)
	}
}
