package runtime

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// Message travels on a channel between two tasks: a batch, a barrier, a
// watermark, an idleness announcement or the end of the stream.
type Message struct {
	batch        any     // []T, or nil
	barrier      barrier // a checkpoint barrier when its id is not 0
	watermark    int64   // the watermark, when hasWatermark
	hasWatermark bool
	idle         bool // the producer subtask is idle
	eos          bool // the producer subtask will send nothing more
}

// barrierMessage is the message that carries b.
func barrierMessage(b barrier) Message { return Message{barrier: b} }

var endOfStream = Message{eos: true}

// Router is the producer side of one edge for one producer subtask: it
// buffers records per consumer subtask and sends full batches.
type Router interface {
	Emitter
	// Flush sends every buffered record.
	Flush() error
	// Broadcast flushes, then sends m (a barrier, a watermark, an idleness
	// announcement or the end of the stream) to every consumer subtask.
	Broadcast(m Message) error
}

// NewRouter returns the router of an edge whose records are of type T.
// keyGroup maps a record to its key group and is used with [Hash] only.
func NewRouter[T any](ctx context.Context, p Partitioning, outs []chan<- Message, batchSize, maxParallelism int, keyGroup func(T) int) Router {
	r := &router[T]{ctx: ctx, p: p, outs: outs, batchSize: batchSize, maxParallelism: maxParallelism, keyGroup: keyGroup}
	r.waited, _ = ctx.Value(backpressureKey{}).(*atomic.Int64)
	if caps, ok := ctx.Value(batchCapsKey{}).([]*atomic.Int64); ok && len(caps) == len(outs) {
		r.caps = caps
	}
	r.bufs = make([][]T, len(outs))
	r.peaks = make([]int, len(outs))
	for i := range r.bufs {
		r.bufs[i] = make([]T, 0, batchSize)
	}
	return r
}

type router[T any] struct {
	ctx            context.Context
	p              Partitioning
	outs           []chan<- Message
	bufs           [][]T
	batchSize      int
	maxParallelism int
	keyGroup       func(T) int
	peaks          []int // per consumer: the decaying size of the batches sent (nextBatchCap)
	next           int   // rebalance: the consumer that gets the next batch
	// waited counts the time spent waiting for room in full channels;
	// nil when the context carried no counter.
	waited *atomic.Int64
	// caps are the consumers' batch size limits (buffer debloating, see
	// debloater); nil when the context carried none: batchSize.
	caps []*atomic.Int64
}

// limit is the size at which the batch for consumer i is sent.
func (r *router[T]) limit(i int) int {
	if r.caps != nil {
		if c := int(r.caps[i].Load()); c > 0 && c < r.batchSize {
			return c
		}
	}
	return r.batchSize
}

func (r *router[T]) Emit(batch any) error {
	records, ok := batch.([]T)
	if !ok {
		return fmt.Errorf("runtime: router got a %T, want a %T", batch, records)
	}
	switch r.p {
	case Forward:
		return r.append(0, records)
	case Rebalance:
		i := r.next
		r.next = (r.next + 1) % len(r.outs)
		return r.append(i, records)
	case Broadcast:
		for i := range r.outs {
			if err := r.append(i, records); err != nil {
				return err
			}
		}
		return nil
	}
	n := len(r.outs)
	for _, rec := range records {
		i := r.keyGroup(rec) * n / r.maxParallelism
		r.bufs[i] = append(r.bufs[i], rec)
		if len(r.bufs[i]) >= r.limit(i) {
			if err := r.send(i); err != nil {
				return err
			}
		}
	}
	return nil
}

// append adds records to consumer i's buffer, sending full batches.
func (r *router[T]) append(i int, records []T) error {
	for len(records) > 0 {
		limit := r.limit(i)
		take := min(max(limit-len(r.bufs[i]), 0), len(records))
		r.bufs[i] = append(r.bufs[i], records[:take]...)
		records = records[take:]
		if len(r.bufs[i]) >= limit {
			if err := r.send(i); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *router[T]) send(i int) error {
	sent := len(r.bufs[i])
	if err := r.put(i, Message{batch: r.bufs[i]}); err != nil {
		return err
	}
	r.peaks[i] = max(sent, r.peaks[i]*3/4)
	r.bufs[i] = make([]T, 0, nextBatchCap(r.peaks[i], r.batchSize))
	return nil
}

// minBatchCap is the least capacity of a batch buffer.
const minBatchCap = 16

// nextBatchCap is the capacity of the buffer that follows the batches
// whose sizes decayed to peak (each batch sent keeps the larger of its
// size and 3/4 of the peak before): twice the peak, at least minBatchCap
// and at most the batch size. A source flushes after every poll, often
// with a few records when a filter follows it; a buffer of the whole batch
// size for each of them cost a large zeroed allocation per poll (17% of
// Nexmark q3's CPU). Twice the last batch alone was too little where full
// batches alternate with a poll's last, partial one: the next buffer then
// grew by copying (q18 lost 15%).
func nextBatchCap(peak, batchSize int) int {
	return min(batchSize, max(minBatchCap, 2*peak))
}

func (r *router[T]) put(i int, m Message) error {
	select {
	case r.outs[i] <- m:
		return nil
	default:
	}
	// The channel is full: the consumer holds the producer back.
	start := time.Now()
	defer func() {
		if r.waited != nil {
			r.waited.Add(int64(time.Since(start)))
		}
	}()
	select {
	case r.outs[i] <- m:
		return nil
	case <-r.ctx.Done():
		return r.ctx.Err()
	}
}

// batchCapsKey is the context key of the batch size limits of a router's
// consumers, in the order of its channels (buffer debloating).
type batchCapsKey struct{}

// withBatchCaps returns ctx carrying caps, the batch size limits of the
// consumers of the channels a router built with it sends on, in order.
func withBatchCaps(ctx context.Context, caps []*atomic.Int64) context.Context {
	return context.WithValue(ctx, batchCapsKey{}, caps)
}

// backpressureKey is the context key of the counter of the time a task's
// routers wait for room in full channels.
type backpressureKey struct{}

// withBackpressure returns ctx carrying waited, which the routers built
// with it add the time they wait for room to.
func withBackpressure(ctx context.Context, waited *atomic.Int64) context.Context {
	return context.WithValue(ctx, backpressureKey{}, waited)
}

func (r *router[T]) Flush() error {
	for i := range r.bufs {
		if len(r.bufs[i]) > 0 {
			if err := r.send(i); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *router[T]) Broadcast(m Message) error {
	if err := r.Flush(); err != nil {
		return err
	}
	for i := range r.outs {
		if err := r.put(i, m); err != nil {
			return err
		}
	}
	return nil
}
