// Package source defines the contract between the engine and every source.
//
// A source is divided into splits: a file, a Kafka partition, one slice of a
// generated sequence. Split ids are stable strings. The engine assigns the
// splits to the parallel subtasks of the source, stores each split's position
// in every checkpoint, and on restore reopens each split at its recorded
// position, whatever the new parallelism. A split's position is an opaque
// byte string owned by the source.
package source

import (
	"context"
	"io"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
)

// Source reads records of type T from a set of splits.
type Source[T any] interface {
	// Splits lists the source's splits. It must return the same ids, in the
	// same order, every time it is called for the same configuration.
	Splits(ctx context.Context) ([]string, error)
	// Open opens a reader on split at position, which is nil to start at the
	// beginning, or a value returned by [Reader.Position] earlier.
	Open(ctx context.Context, split string, position []byte) (Reader[T], error)
}

// Reader reads one split. A Reader is used by one goroutine at a time.
type Reader[T any] interface {
	// Read fills buf[:n] with the next records. It returns 0, nil when no
	// record is available right now (the engine waits a little and calls
	// again), and 0, io.EOF when the split is finished. Read must not block
	// for long: the engine injects checkpoint barriers between calls.
	Read(ctx context.Context, buf []T) (n int, err error)
	// Position returns the position just after the last record returned by
	// Read; opening the split at this position resumes with the next record.
	// Before the first Read it returns the position the reader was opened
	// at, resolved (a "latest offset" start is fixed at Open, so that a
	// restore does not resolve it again). The engine records it right after
	// Open. The returned slice must not be modified later by the reader.
	Position() []byte
	// Close releases resources.
	Close() error
}

// Lagger is implemented by a [Reader] that can tell how much of its split
// is left to read; the control API shows it per split. The engine calls
// Lag from the goroutine that reads, right after each Read.
type Lagger interface {
	// Lag returns how far the split's end is ahead of the reader's
	// position, in unit ("records", "bytes" or "offsets"); ok is false
	// when it is not known (an unbounded split, a Kafka partition whose
	// end was not fetched yet).
	Lag() (lag int64, unit string, ok bool)
}

// WatermarkReader is a [Reader] that knows its split's watermark itself
// instead of deriving it from the event times of its records: a Kafka
// topic written by an upstream job carries that job's watermarks
// (kafka.SourceOptions.Upstreams). Read through stream.SourceWithEventTime
// (required), the split's watermark is the reader's; the event time's
// MaxOutOfOrderness and IdleTimeout do not apply to it. The engine calls
// both methods from the goroutine that reads.
type WatermarkReader interface {
	// Watermark returns the split's watermark, in nanoseconds since the
	// Unix epoch (math.MinInt64 before there is one), and whether the
	// split is idle: nothing it reads until its next watermark can hold
	// event time back.
	Watermark() (wm int64, idle bool)
	// ResumeWatermark gives a reader opened at a checkpointed position the
	// split's watermark at that checkpoint: the reader's watermark does
	// not go below it.
	ResumeWatermark(wm int64)
}

// EOF is returned by [Reader.Read] when a split is finished.
var EOF = io.EOF

// Discoverer is implemented by sources whose splits grow while a job runs,
// such as Kafka topics gaining partitions or a topic pattern matching new
// topics. The engine lists the splits again at the interval and opens the
// new ones with OpenNew. Splits are never removed from a running job.
//
// Sources without it are static: split i of the list is read by subtask
// i mod parallelism, which is why Splits must be stable.
type Discoverer[T any] interface {
	// DiscoveryInterval is the time between two listings; 0 disables
	// discovery while the job runs (OpenNew and Owner are still used).
	DiscoveryInterval() time.Duration
	// Owner returns the subtask, in [0, parallelism), that reads split. It
	// must depend on the split id and parallelism alone, because the list
	// of splits changes.
	Owner(split string, parallelism int) int
	// OpenNew opens a split the job has no position for although it ran
	// before: one discovered while the job runs, or one that appeared since
	// the restored checkpoint. Sources should start it at its beginning, so
	// that records written to it before it was discovered are not missed.
	OpenNew(ctx context.Context, split string) (Reader[T], error)
}

// CheckpointListener is implemented by sources that act when a checkpoint
// completes, such as committing offsets to a Kafka consumer group so that
// lag can be monitored. Never for correctness: the engine restores
// positions from its own checkpoints. Errors are logged and do not fail
// the job.
type CheckpointListener interface {
	// CheckpointComplete reports that checkpoint id completed with these
	// positions of the splits one subtask reads, by split id.
	CheckpointComplete(ctx context.Context, id checkpoint.ID, positions map[string][]byte) error
}
