package stream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/source"
)

// sourceOp is one subtask of a source: it reads the splits it owns in turn.
// A static source's split i belongs to subtask i mod parallelism; a
// [source.Discoverer] names the owner itself and gains splits while the job
// runs.
type sourceOp[T any] struct {
	// ctx is the attempt's context, for work a poll's interruption must
	// not cut short: listing and opening discovered splits.
	ctx      context.Context
	oc       runtime.OperatorContext
	src      source.Source[T]
	disc     source.Discoverer[T] // nil for static sources
	known    map[string]bool      // every split listed so far, owned or not
	lastList time.Time
	readers  []*splitReader[T]
	next     int
	buf      []T
	out      runtime.Emitter
	// taken holds the positions of each checkpoint not yet completed, for
	// a source.CheckpointListener; nil for other sources.
	taken map[checkpoint.ID]map[string][]byte
	// et tracks event time; nil for sources without it.
	et *EventTime[T]
	// lags holds the lag of each split whose reader tells it, for Lag,
	// which other goroutines call.
	lagMu sync.Mutex
	lags  map[string]runtime.SplitLag
	// hold is the hold of the idle splits after another split resumed
	// (see Watermark).
	hold runtime.ResumeHold
	// now is the clock of Watermark; nil is time.Now (tests set it).
	now func() time.Time
}

type splitReader[T any] struct {
	split string
	r     source.Reader[T]
	pos   []byte
	done  bool
	// newest is the latest event time read from the split (UnixNano),
	// checkpointed with the position so that a restored source resumes
	// event time where it was even if no record follows; lastRead is when
	// a record was last read from it (for idleness).
	newest   int64
	lastRead time.Time
	// wm and idle are the split's watermark and idleness when Watermark
	// last looked; spent is set when it stayed idle through a whole hold,
	// until it is active.
	wm          int64
	idle, spent bool
	// wr is r when it tells the split's watermark itself; newest then
	// holds the split's watermark, checkpointed and handed back to the
	// reader at a restore.
	wr source.WatermarkReader
}

func newSourceOp[T any](ctx context.Context, oc runtime.OperatorContext, src source.Source[T], et *EventTime[T], out runtime.Emitter) (*sourceOp[T], error) {
	splits, err := src.Splits(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing splits: %w", err)
	}
	restored := map[string]format.SplitPosition{}
	if oc.Restored != nil {
		for _, e := range oc.Restored.Entries {
			p, err := format.DecodeSplitPosition(e)
			if err != nil {
				return nil, err
			}
			restored[p.Split] = p
		}
	}
	s := &sourceOp[T]{ctx: ctx, oc: oc, src: src, et: et, known: map[string]bool{}, lastList: time.Now(), out: out, buf: make([]T, oc.BatchSize)}
	s.disc, _ = src.(source.Discoverer[T])
	if _, ok := src.(source.CheckpointListener); ok {
		s.taken = map[checkpoint.ID]map[string][]byte{}
	}
	for i, split := range splits {
		s.known[split] = true
		if s.owner(i, split) != oc.Subtask {
			continue
		}
		p, ok := restored[split]
		sr := &splitReader[T]{split: split, pos: p.Pos, newest: runtime.MinWatermark}
		if ok {
			sr.newest = p.Newest
		}
		// A split restored as finished is opened again at its end: a
		// bounded source ends it at once, and a source that is no longer
		// bounded reads on or explains why it cannot (never silently
		// idle). A split the restored checkpoint does not know appeared
		// since.
		isNew := !ok && oc.Restored != nil
		if err := s.open(ctx, sr, isNew); err != nil {
			s.closeReaders()
			return nil, err
		}
		s.readers = append(s.readers, sr)
		if ok && sr.wr != nil {
			sr.wr.ResumeWatermark(p.Newest)
		}
		if ok && p.Idle && et != nil && et.IdleTimeout > 0 && sr.wr == nil {
			s.resumeIdle(sr)
		}
	}
	return s, nil
}

// resumeIdle makes sr, restored from a checkpoint at which it was idle,
// idle at once, until it yields a record. Restored as active instead, it
// said so downstream for a whole IdleTimeout with no record read: to the
// readers of a repartition topic, a writer turning active, which spent the
// hold of the other idle writers (kafka's upstreamWatermarks) before their
// input resumed, and the records they wrote next were late
// (TestClusterRunsAJobWrittenOnce, docs/kafka.md).
func (s *sourceOp[T]) resumeIdle(sr *splitReader[T]) {
	sr.lastRead = sr.lastRead.Add(-s.et.IdleTimeout)
	sr.idle = true
}

// owner returns the subtask reading split, the i-th listed.
func (s *sourceOp[T]) owner(i int, split string) int {
	p := s.oc.Parallelism
	if s.disc != nil {
		return (s.disc.Owner(split, p)%p + p) % p // in range, whatever Owner returns
	}
	return i % p
}

// open opens sr at its position, or as a new split of a running job.
func (s *sourceOp[T]) open(ctx context.Context, sr *splitReader[T], isNew bool) error {
	var err error
	if isNew && s.disc != nil {
		sr.r, err = s.disc.OpenNew(ctx, sr.split)
	} else {
		sr.r, err = s.src.Open(ctx, sr.split, sr.pos)
	}
	if err != nil {
		return fmt.Errorf("opening split %q: %w", sr.split, err)
	}
	if sr.wr, _ = sr.r.(source.WatermarkReader); sr.wr != nil && s.et == nil {
		err := fmt.Errorf("split %q carries the watermarks of an upstream job (kafka.SourceOptions.Upstreams), which only a source with event time uses: read it with stream.SourceWithEventTime, or leave Upstreams 0", sr.split)
		return sink.Permanent(errors.Join(err, sr.r.Close())) // restarting cannot fix the job
	}
	// A split not read before the next checkpoint must still restore at the
	// position it was opened at (a "latest" Kafka offset resolved now, not
	// at the restore).
	sr.pos = sr.r.Position()
	sr.lastRead = time.Now()
	return nil
}

// discover lists the splits again and opens the new ones this subtask owns.
// A failed listing is logged and tried again at the next interval.
func (s *sourceOp[T]) discover(ctx context.Context) error {
	s.lastList = time.Now()
	splits, err := s.src.Splits(ctx)
	if err != nil {
		s.oc.Logger.Warn("listing splits failed; trying again at the next discovery interval", "error", err)
		return nil
	}
	for _, split := range splits {
		if s.known[split] {
			continue
		}
		s.known[split] = true
		if s.owner(0, split) != s.oc.Subtask {
			continue
		}
		sr := &splitReader[T]{split: split, newest: runtime.MinWatermark}
		if err := s.open(ctx, sr, true); err != nil {
			return err
		}
		s.oc.Logger.Info("new split discovered", "split", split)
		s.readers = append(s.readers, sr)
	}
	return nil
}

// Poll reads one batch from the next split that has records. ctx may be
// cancelled to interrupt a blocking Read (see runtime.SourceOperator).
func (s *sourceOp[T]) Poll(ctx context.Context) (int, bool, error) {
	discovering := s.disc != nil && s.disc.DiscoveryInterval() > 0
	if discovering && time.Since(s.lastList) >= s.disc.DiscoveryInterval() {
		if err := s.discover(s.ctx); err != nil {
			return 0, false, err
		}
	}
	for range s.readers {
		sr := s.readers[s.next]
		s.next = (s.next + 1) % len(s.readers)
		if sr.done {
			continue
		}
		n, err := sr.r.Read(ctx, s.buf)
		if l, ok := sr.r.(source.Lagger); ok {
			s.noteLag(sr.split, l)
		}
		if n > 0 {
			sr.pos = sr.r.Position()
			s.oc.Records.Add(int64(n))
			if s.et != nil && sr.wr == nil {
				sr.lastRead = time.Now()
				for _, v := range s.buf[:n] {
					sr.newest = max(sr.newest, s.et.Timestamp(v).UnixNano())
				}
			}
			if err := s.out.Emit(s.buf[:n]); err != nil {
				return 0, false, err
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			sr.done = true
			sr.pos = sr.r.Position()
		case err != nil:
			return 0, false, fmt.Errorf("reading split %q: %w", sr.split, err)
		}
		if n > 0 {
			return n, false, nil
		}
	}
	if discovering {
		return 0, false, nil // new splits may still come
	}
	for _, sr := range s.readers {
		if !sr.done {
			return 0, false, nil
		}
	}
	return 0, true, nil
}

// noteLag records the lag l tells of split.
func (s *sourceOp[T]) noteLag(split string, l source.Lagger) {
	lag, unit, ok := l.Lag()
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	if !ok {
		delete(s.lags, split)
		return
	}
	if s.lags == nil {
		s.lags = map[string]runtime.SplitLag{}
	}
	s.lags[split] = runtime.SplitLag{Split: split, Lag: lag, Unit: unit}
}

// Lag returns the lag of the splits whose readers tell it
// (runtime.LagReporter).
func (s *sourceOp[T]) Lag() []runtime.SplitLag {
	s.lagMu.Lock()
	defer s.lagMu.Unlock()
	return slices.Collect(maps.Values(s.lags))
}

// Watermark returns the least watermark of the splits that are neither
// finished nor idle; when there is none, it returns the greatest watermark of
// all splits and idle. A split's watermark trails its newest event time by
// MaxOutOfOrderness (and 1ns: a record at exactly that bound is on time),
// unless its reader tells it (source.WatermarkReader).
//
// When an idle split turns active again, the splits still idle hold the
// watermark at theirs for runtime.ResumeGrace, or until they turn active
// too, as a task's inputs do (docs/event-time.md, "Resuming together"); a
// split idle through a whole hold is not held again until it was active.
func (s *sourceOp[T]) Watermark() (int64, bool) {
	if s.et == nil {
		return runtime.MinWatermark, false
	}
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	if s.hold.End(now) {
		for _, sr := range s.readers {
			sr.spent = sr.spent || sr.idle
		}
	}
	resumed, holdable := false, false
	for _, sr := range s.readers {
		var idle bool
		sr.wm, idle = s.splitWatermark(sr, now)
		if sr.done {
			continue
		}
		resumed = resumed || sr.idle && !idle
		sr.idle = idle
		if !idle {
			sr.spent = false
		}
		holdable = holdable || idle && !sr.spent
	}
	if resumed && holdable {
		s.hold.Begin(now)
	}
	holding := s.hold.Holding()
	least, greatest, active := runtime.MaxWatermark, runtime.MinWatermark, false
	for _, sr := range s.readers {
		greatest = max(greatest, sr.wm)
		if sr.done {
			continue
		}
		if !sr.idle {
			active = true
		}
		if !sr.idle || holding && !sr.spent {
			least = min(least, sr.wm)
		}
	}
	if !active {
		return greatest, true
	}
	return least, false
}

// splitWatermark returns sr's watermark and whether it is idle at now:
// its reader's, if it tells them, else from its newest event time and the
// time it last yielded a record.
func (s *sourceOp[T]) splitWatermark(sr *splitReader[T], now time.Time) (wm int64, idle bool) {
	if sr.wr != nil {
		return sr.wr.Watermark()
	}
	wm = runtime.MinWatermark
	if sr.newest != runtime.MinWatermark {
		wm = sr.newest - int64(s.et.MaxOutOfOrderness) - 1
	}
	return wm, s.et.IdleTimeout > 0 && now.Sub(sr.lastRead) >= s.et.IdleTimeout
}

func (s *sourceOp[T]) Snapshot(_ context.Context, id checkpoint.ID) (func() (checkpoint.SubtaskSnapshot, error), error) {
	var snap checkpoint.SubtaskSnapshot
	now := time.Now()
	if s.now != nil {
		now = s.now()
	}
	for _, sr := range s.readers {
		idle := false
		if sr.wr != nil {
			sr.newest, _ = sr.wr.Watermark() // the reader restores its own idleness
		} else if s.et != nil {
			_, idle = s.splitWatermark(sr, now)
		}
		snap.Entries = append(snap.Entries, format.EncodeSplitPosition(format.SplitPosition{Split: sr.split, Pos: sr.pos, Done: sr.done, Newest: sr.newest, Idle: idle && !sr.done}))
	}
	if s.taken != nil {
		positions := make(map[string][]byte, len(s.readers))
		for _, sr := range s.readers {
			positions[sr.split] = sr.pos
		}
		s.taken[id] = positions
	}
	return func() (checkpoint.SubtaskSnapshot, error) { return snap, nil }, nil
}

// CheckpointComplete hands the positions of the newest checkpoint at or
// below id to a source.CheckpointListener; its errors are only logged.
func (s *sourceOp[T]) CheckpointComplete(ctx context.Context, id checkpoint.ID) error {
	l, ok := s.src.(source.CheckpointListener)
	if !ok {
		return nil
	}
	var newest checkpoint.ID
	for taken := range s.taken {
		if taken <= id {
			newest = max(newest, taken)
		}
	}
	if newest == 0 {
		return nil
	}
	positions := s.taken[newest]
	for taken := range s.taken {
		if taken <= id {
			delete(s.taken, taken)
		}
	}
	if err := l.CheckpointComplete(ctx, newest, positions); err != nil {
		s.oc.Logger.Warn("source checkpoint listener failed (monitoring only; the job goes on)", "checkpoint", newest, "error", err)
	}
	return nil
}

func (s *sourceOp[T]) Close(context.Context, checkpoint.ID, bool) error { return s.closeReaders() }

func (s *sourceOp[T]) closeReaders() error {
	var errs []error
	for _, sr := range s.readers {
		if sr.r != nil {
			errs = append(errs, sr.r.Close())
		}
	}
	return errors.Join(errs...)
}
