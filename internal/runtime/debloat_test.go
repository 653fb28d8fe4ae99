package runtime

import (
	"context"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// TestDebloaterLimit: the published batch size holds the target's worth
// of the measured processing in the channel's batches, within [16,
// batch size], and changes only once a window of work was measured.
func TestDebloaterLimit(t *testing.T) {
	d := newDebloater(200*time.Millisecond, 8, 512)
	if got := d.limit.Load(); got != 512 {
		t.Fatalf("before any measure: %d, want the batch size", got)
	}
	// 1,000 records/s of work: 200 ms hold 200 records, 25 per batch.
	d.processed(10, 10*time.Millisecond)
	if got := d.limit.Load(); got != 512 {
		t.Fatalf("after 10ms of work (less than a window): %d, want it unchanged", got)
	}
	d.processed(40, 40*time.Millisecond)
	if got := d.limit.Load(); got != 25 {
		t.Fatalf("at 1,000 records/s: %d, want 25", got)
	}
	// 100 records/s: 2.5 a batch, held at the least, 16.
	d.processed(5, 50*time.Millisecond)
	if got := d.limit.Load(); got != minBatchCap {
		t.Fatalf("at 100 records/s: %d, want %d", got, minBatchCap)
	}
	// A fast consumer: the batch size.
	d.processed(1_000_000, time.Second)
	if got := d.limit.Load(); got != 512 {
		t.Fatalf("at 1 M records/s: %d, want 512", got)
	}
}

// TestRouterSendsAtTheConsumersLimit: a router with its consumers' batch
// limits sends each consumer batches of its limit, on every partitioning
// path, and follows a changed limit; without limits, the batch size.
func TestRouterSendsAtTheConsumersLimit(t *testing.T) {
	for _, p := range []Partitioning{Forward, Rebalance, Hash} {
		cs, outs := channels(2, 100)
		limits := []*atomic.Int64{new(atomic.Int64), new(atomic.Int64)}
		limits[0].Store(16)
		limits[1].Store(40)
		ctx := withBatchCaps(context.Background(), limits)
		if p == Forward {
			cs, outs, limits = cs[:1], outs[:1], limits[:1]
			ctx = withBatchCaps(context.Background(), limits)
		}
		r := NewRouter[int](ctx, p, outs, 128, 128, func(v int) int { return v % 128 })
		records := make([]int, 400)
		for i := range records {
			records[i] = i
		}
		for range 2 {
			if err := r.Emit(records); err != nil {
				t.Fatal(err)
			}
		}
		for i, c := range cs {
			sizes := batchSizes(c)
			want := int(limits[i].Load())
			if len(sizes) == 0 || slices.ContainsFunc(sizes, func(n int) bool { return n != want }) {
				t.Errorf("%v, consumer %d with limit %d: batches of %v", p, i, want, sizes)
			}
		}
		limits[0].Store(64)
		if err := r.Emit(records); err != nil {
			t.Fatal(err)
		}
		if sizes := batchSizes(cs[0]); len(sizes) == 0 || sizes[0] != 64 && p != Hash {
			t.Errorf("%v, consumer 0 after its limit became 64: batches of %v", p, sizes)
		}
	}
	cs, outs := channels(1, 100)
	r := NewRouter[int](context.Background(), Forward, outs, 128, 128, nil)
	if err := r.Emit(make([]int, 300)); err != nil {
		t.Fatal(err)
	}
	if sizes := batchSizes(cs[0]); !slices.Equal(sizes, []int{128, 128}) {
		t.Errorf("without limits: batches of %v, want two of 128", sizes)
	}
}

// batchSizes drains c and returns the sizes of the batches it held.
func batchSizes(c chan Message) []int {
	var sizes []int
	for {
		select {
		case m := <-c:
			if m.batch != nil {
				sizes = append(sizes, len(m.batch.([]int)))
			}
		default:
			return sizes
		}
	}
}
