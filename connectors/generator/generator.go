// Package generator provides a deterministic, splittable source of generated
// events, for demos, tests and benchmarks.
//
// The events are gen(0), gen(1), ... gen(Count-1). They are dealt to splits by
// index: split s yields indices s, s+Splits, s+2*Splits, ... in that order. A
// split's position is the number of its events already emitted, so a restored
// job regenerates exactly the events after the checkpoint, provided gen is
// deterministic: the same index must always produce the same event. Derive
// per-event randomness with [Rand], never from a shared or time-seeded
// generator.
package generator

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/source"
)

// DefaultSplits is the number of splits when [Options.Splits] is 0.
const DefaultSplits = 4

// MaxSplits bounds [Options.Splits].
const MaxSplits = 1 << 16

// splitPrefix starts every split id: "gen-0", "gen-1", ...
const splitPrefix = "gen-"

// Options configures a generator [Source].
type Options struct {
	// Count is the number of events. 0 means unbounded (in practice
	// 2^64-1 events).
	Count uint64
	// Splits is the number of splits, at most MaxSplits. 0 means
	// DefaultSplits. More splits let more subtasks read in parallel.
	Splits int
	// Rate is the target number of events per second across all splits,
	// assuming every split is read concurrently; each split gets
	// Rate/Splits. 0 means as fast as possible. A split that was not read
	// for a while catches up by at most one second of its share (the
	// burst of Guava's RateLimiter, which Flink's DataGeneratorSource
	// uses): a stall of the reader never releases its whole backlog in
	// one read.
	Rate float64
	// Now returns the current time for rate limiting. nil means time.Now;
	// tests set a fake clock.
	Now func() time.Time
}

// validate checks o and fills in defaults.
func (o *Options) validate() error {
	if o.Splits < 0 || o.Splits > MaxSplits {
		return fmt.Errorf("generator: Options.Splits is %d: use a value in [1, %d], or 0 for the default %d", o.Splits, MaxSplits, DefaultSplits)
	}
	if o.Splits == 0 {
		o.Splits = DefaultSplits
	}
	if math.IsNaN(o.Rate) || math.IsInf(o.Rate, 0) || o.Rate < 0 {
		return fmt.Errorf("generator: Options.Rate is %v: use a finite number of events per second >= 0 (0 means unlimited)", o.Rate)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return nil
}

// Source generates events. It implements [source.Source].
type Source[T any] struct {
	opts  Options
	gen   func(index uint64) T
	total uint64 // number of events, with unbounded mapped to MaxUint64
}

var _ source.Source[int] = (*Source[int])(nil)

// New returns a source of the events gen(0) ... gen(opts.Count-1). gen must
// be deterministic and safe for concurrent use: splits are read by several
// goroutines and re-read after a restore.
func New[T any](opts Options, gen func(index uint64) T) (*Source[T], error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if gen == nil {
		return nil, errors.New("generator: gen is nil: pass a deterministic function from event index to event")
	}
	total := opts.Count
	if total == 0 {
		total = math.MaxUint64
	}
	return &Source[T]{opts: opts, gen: gen, total: total}, nil
}

// Rand returns a random generator determined by (seed, index), for deriving
// the randomness of event index inside gen: the same pair always yields the
// same sequence, whatever order events are generated in.
func Rand(seed, index uint64) *rand.Rand {
	return rand.New(rand.NewPCG(seed, index))
}

// Splits returns the split ids "gen-0" ... "gen-{Splits-1}".
func (s *Source[T]) Splits(context.Context) ([]string, error) {
	ids := make([]string, s.opts.Splits)
	for i := range ids {
		ids[i] = splitPrefix + strconv.Itoa(i)
	}
	return ids, nil
}

// Open opens split at position, nil for the beginning.
func (s *Source[T]) Open(_ context.Context, split string, position []byte) (source.Reader[T], error) {
	idx, err := s.parseSplit(split)
	if err != nil {
		return nil, err
	}
	size := s.splitSize(idx)
	var emitted uint64
	if position != nil {
		v, n := binary.Uvarint(position)
		if n <= 0 || n != len(position) {
			return nil, fmt.Errorf("generator: split %q: position %x is not a uvarint event count: pass nil or a value returned by Reader.Position", split, position)
		}
		if v > size {
			return nil, fmt.Errorf("generator: split %q: position %d is past the split's %d events: the checkpoint was taken with other Options (Count or Splits)", split, v, size)
		}
		emitted = v
	}
	return &reader[T]{
		src:      s,
		split:    idx,
		size:     size,
		emitted:  emitted,
		refilled: s.opts.Now(),
	}, nil
}

// parseSplit turns a split id into its index.
func (s *Source[T]) parseSplit(split string) (uint64, error) {
	digits, ok := strings.CutPrefix(split, splitPrefix)
	idx, err := strconv.ParseUint(digits, 10, 64)
	if !ok || err != nil || strconv.FormatUint(idx, 10) != digits || idx >= uint64(s.opts.Splits) {
		return 0, fmt.Errorf("generator: unknown split %q: use one of gen-0 ... gen-%d as returned by Splits", split, s.opts.Splits-1)
	}
	return idx, nil
}

// splitSize returns how many of the source's events split s yields.
func (s *Source[T]) splitSize(split uint64) uint64 {
	if split >= s.total {
		return 0
	}
	return (s.total-1-split)/uint64(s.opts.Splits) + 1
}

// reader reads one split.
type reader[T any] struct {
	src     *Source[T]
	split   uint64
	size    uint64 // events in this split
	emitted uint64 // events of this split emitted so far, including before Open
	// tokens is the rate limit's bucket: events the split may emit now,
	// at most one second of its share; refilled is when it was last
	// topped up.
	tokens   float64
	refilled time.Time
}

// Read generates the split's next events into buf. Under a rate limit it
// returns 0, nil while the split is ahead of its share; it never sleeps.
func (r *reader[T]) Read(_ context.Context, buf []T) (int, error) {
	if r.emitted == r.size {
		return 0, io.EOF
	}
	n := uint64(len(buf))
	n = min(n, r.size-r.emitted)
	if r.src.opts.Rate > 0 {
		share := r.src.opts.Rate / float64(r.src.opts.Splits)
		now := r.src.opts.Now()
		r.tokens = min(max(share, 1), r.tokens+max(now.Sub(r.refilled).Seconds(), 0)*share)
		r.refilled = now
		if r.tokens < 1 {
			return 0, nil
		}
		n = min(n, uint64(r.tokens))
		r.tokens -= float64(n)
	}
	step := uint64(r.src.opts.Splits)
	index := r.split + r.emitted*step
	for i := range n {
		buf[i] = r.src.gen(index)
		index += step
	}
	r.emitted += n
	return int(n), nil
}

// Position returns the number of events of the split emitted so far.
func (r *reader[T]) Position() []byte {
	return binary.AppendUvarint(nil, r.emitted)
}

// Lag returns the events of the split not generated yet; unknown for an
// unbounded source (source.Lagger).
func (r *reader[T]) Lag() (int64, string, bool) {
	if r.src.opts.Count == 0 {
		return 0, "", false
	}
	return int64(r.size - r.emitted), "records", true
}

// Close does nothing: a generator holds no resources.
func (r *reader[T]) Close() error { return nil }
