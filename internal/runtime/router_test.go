package runtime

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/state"
)

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func channels(n, capacity int) ([]chan Message, []chan<- Message) {
	var cs []chan Message
	var outs []chan<- Message
	for range n {
		c := make(chan Message, capacity)
		cs = append(cs, c)
		outs = append(outs, c)
	}
	return cs, outs
}

func drain(c chan Message) (records []int, batches int, tail []Message) {
	for {
		select {
		case m := <-c:
			if m.batch != nil {
				records = append(records, m.batch.([]int)...)
				batches++
			} else {
				tail = append(tail, m)
			}
		default:
			return
		}
	}
}

func TestHashRouterSendsEachKeyGroupToItsOwner(t *testing.T) {
	const maxP, p = 128, 3
	cs, outs := channels(p, 1000)
	kg := func(v int) int { return v % maxP }
	r := NewRouter(context.Background(), Hash, outs, 16, maxP, kg)
	var in []int
	for v := range 1000 {
		in = append(in, v)
	}
	if err := r.Emit(in); err != nil {
		t.Fatal(err)
	}
	if err := r.Broadcast(barrierMessage(barrier{id: 7, kind: checkpoint.KindCheckpoint})); err != nil {
		t.Fatal(err)
	}
	total := 0
	for s, c := range cs {
		recs, _, tail := drain(c)
		total += len(recs)
		for _, v := range recs {
			if owner := state.SubtaskForKeyGroup(kg(v), p, maxP); owner != s {
				t.Fatalf("record %d (key group %d) went to subtask %d, owner is %d", v, kg(v), s, owner)
			}
		}
		if len(tail) != 1 || tail[0].barrier.id != 7 {
			t.Fatalf("subtask %d: after the records want one barrier 7, got %+v", s, tail)
		}
	}
	if total != 1000 {
		t.Fatalf("%d records routed, want 1000", total)
	}
}

func TestRebalanceDealsBatchesRoundRobin(t *testing.T) {
	cs, outs := channels(2, 10)
	r := NewRouter[int](context.Background(), Rebalance, outs, 4, 128, nil)
	for i := range 4 {
		if err := r.Emit([]int{i, i, i}); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	a, _, _ := drain(cs[0])
	b, _, _ := drain(cs[1])
	if !slices.Equal(a, []int{0, 0, 0, 2, 2, 2}) || !slices.Equal(b, []int{1, 1, 1, 3, 3, 3}) {
		t.Fatalf("consumer 0 got %v, consumer 1 got %v", a, b)
	}
}

func TestBroadcastRouterSendsEveryRecordToEveryConsumer(t *testing.T) {
	cs, outs := channels(3, 10)
	r := NewRouter[int](context.Background(), Broadcast, outs, 2, 128, nil)
	buf := []int{1, 2, 3}
	if err := r.Emit(buf); err != nil {
		t.Fatal(err)
	}
	buf[0] = 99 // the emitter may reuse its buffer after Emit returns
	if err := r.Broadcast(endOfStream); err != nil {
		t.Fatal(err)
	}
	for i, c := range cs {
		recs, _, tail := drain(c)
		if !slices.Equal(recs, []int{1, 2, 3}) || len(tail) != 1 || !tail[0].eos {
			t.Errorf("consumer %d got %v, then %+v; want 1 2 3, then the end of the stream", i, recs, tail)
		}
	}
}

func TestForwardRouterBatchesAndKeepsOrder(t *testing.T) {
	cs, outs := channels(1, 10)
	r := NewRouter[int](context.Background(), Forward, outs, 4, 128, nil)
	buf := []int{1, 2, 3, 4, 5, 6}
	if err := r.Emit(buf); err != nil {
		t.Fatal(err)
	}
	buf[5] = 99 // the emitter may reuse its buffer after Emit returns
	if err := r.Broadcast(endOfStream); err != nil {
		t.Fatal(err)
	}
	recs, batches, tail := drain(cs[0])
	if !slices.Equal(recs, []int{1, 2, 3, 4, 5, 6}) || batches != 2 || len(tail) != 1 || !tail[0].eos {
		t.Fatalf("got %v in %d batches, then %+v", recs, batches, tail)
	}
}

func TestRouterStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	_, outs := channels(1, 0) // nobody reads
	r := NewRouter[int](ctx, Forward, outs, 1, 128, nil)
	cancel()
	if err := r.Emit([]int{1}); err == nil {
		t.Fatal("Emit into a full channel after cancellation returned nil")
	}
}

// TestNextBatchCap: the next buffer holds twice the decayed peak of the
// batches sent, at least minBatchCap and at most the batch size; full
// batches alternating with partial ones keep it near the batch size, and
// only small batches make it small.
func TestNextBatchCap(t *testing.T) {
	for _, tc := range []struct{ peak, size, want int }{
		{512, 512, 512},
		{300, 512, 512},
		{0, 512, minBatchCap},
		{3, 512, minBatchCap},
		{100, 512, 200},
		{3, 8, 8},
	} {
		if got := nextBatchCap(tc.peak, tc.size); got != tc.want {
			t.Errorf("nextBatchCap(%d, %d) = %d, want %d", tc.peak, tc.size, got, tc.want)
		}
	}
	r := NewRouter[int](context.Background(), Forward, []chan<- Message{make(chan Message, 100)}, 512, 128, nil).(*router[int])
	for range 3 { // a full batch, then a poll's partial last one
		if err := r.Emit(make([]int, 512)); err != nil {
			t.Fatal(err)
		}
		if err := r.Emit(make([]int, 100)); err != nil {
			t.Fatal(err)
		}
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
		if c := cap(r.bufs[0]); c < 512 {
			t.Fatalf("after a full batch and a partial one: a buffer of %d, want the batch size", c)
		}
	}
	for range 20 { // then only polls of 10 records
		if err := r.Emit(make([]int, 10)); err != nil {
			t.Fatal(err)
		}
		if err := r.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	if c := cap(r.bufs[0]); c > 2*minBatchCap {
		t.Fatalf("after 20 batches of 10 records: a buffer of %d, want at most %d", c, 2*minBatchCap)
	}
}
