package stream_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/exactlyonce/exactly/stream"
)

// checkedSource is a counting source whose Check answers err, or waits
// for the context when block is set.
type checkedSource struct {
	counting
	err   error
	block bool
}

func (c checkedSource) Check(ctx context.Context) error {
	if c.block {
		<-ctx.Done()
		return ctx.Err()
	}
	return c.err
}

// checkedSink is a memory sink whose Check answers err.
type checkedSink struct {
	*memSink[int]
	err error
}

func (c checkedSink) Check(context.Context) error { return c.err }

// TestStartChecksSourcesAndSinks checks that Start runs every source's and
// sink's Check and fails with all their errors, each naming its operator,
// releasing the checkpoint storage it acquired meanwhile.
func TestStartChecksSourcesAndSinks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	j := stream.New("checked")
	in := stream.Source(j, "orders", checkedSource{counting: counting{n: 10, splits: 1}, err: errors.New(`topic "orders" does not exist`)})
	stream.SinkTo(in, "totals", checkedSink{memSink: newMemSink[int](), err: errors.New("password authentication failed")})
	_, err := j.Start(context.Background(), stream.Options{CheckpointDir: dir})
	if err == nil {
		t.Fatal("Start succeeded with failing checks")
	}
	for _, want := range []string{`operator "orders" cannot start: topic "orders" does not exist`, `operator "totals" cannot start: password authentication failed`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Start error %q does not say %q", err, want)
		}
	}
	// A negative CheckTimeout skips the checks. The refused start released
	// the ownership it took meanwhile: this start takes it at once (it
	// would wait for the lease, then fail, otherwise).
	r, err := j.Start(context.Background(), stream.Options{CheckpointDir: dir, CheckTimeout: -1})
	if err != nil {
		t.Fatalf("Start with CheckTimeout -1: %v", err)
	}
	if err := r.Wait(); err != nil {
		t.Fatalf("the job with skipped checks: %v", err)
	}
}

// TestStartCheckWithoutAnswer checks that a Check that never answers fails
// the start after Options.CheckTimeout, saying so.
func TestStartCheckWithoutAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		j := stream.New("silent")
		in := stream.Source(j, "orders", checkedSource{counting: counting{n: 10, splits: 1}, block: true})
		stream.SinkTo(in, "totals", newMemSink[int]())
		_, err := j.Start(context.Background(), stream.Options{CheckpointDir: filepath.Join(t.TempDir(), "ckpt"), CheckTimeout: 5 * time.Second})
		if err == nil || !strings.Contains(err.Error(), `operator "orders" cannot start: no answer within 5s (Options.CheckTimeout)`) {
			t.Fatalf("Start = %v, want the silent check's timeout", err)
		}
	})
}
