package runtime

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// Metrics are counters of a running job, safe to read at any time.
type Metrics struct {
	// Completed counts completed checkpoints and savepoints.
	Completed atomic.Int64
	// Aborted counts aborted checkpoints.
	Aborted atomic.Int64
	// Restarts counts restarts after failures.
	Restarts atomic.Int64
	// skipped returns the corrupt completed checkpoints skipped at restore
	// (see Options.SkipCorruptCheckpoints); nil before the store opens.
	skipped func() int64
	// LastCheckpoint describes the last completed checkpoint or savepoint:
	// at first the one the job restored (its Completed is when its last
	// acknowledgement arrived), nil when it started afresh.
	LastCheckpoint atomic.Pointer[CheckpointStats]
	// CheckpointDurations counts the checkpoints and savepoints completed
	// in this process by their time from trigger to metadata written.
	CheckpointDurations DurationHistogram
	// records counts records per operator subtask; see Records.
	records sync.Map // operator name -> *atomic.Int64
	// late counts records too late for an event-time operator.
	late sync.Map // operator name -> *atomic.Int64
	// out counts the records each operator emitted.
	out sync.Map // operator name -> *atomic.Int64
	// times holds each task's time ("head[s]" -> *taskTimes).
	times sync.Map
	// eventTimes holds each task's event time ("head[s]" -> *taskEventTime).
	eventTimes sync.Map
	// obs holds what the control API shows besides the counters.
	obs observations
}

// CheckpointStats describes a completed checkpoint.
type CheckpointStats struct {
	// ID is the checkpoint's id.
	ID checkpoint.ID
	// Triggered is when it was triggered, Completed when its metadata was
	// written (wall clock).
	Triggered, Completed time.Time
	// StateBytes is the size of its state files.
	StateBytes int64
	// SharedBytes is the size of the shared files its state files refer
	// to, each counted once: the database files of the Pebble backend's
	// incremental snapshots. StateBytes + SharedBytes is the size of the
	// whole checkpoint; SharedBytes is 0 for full snapshots.
	SharedBytes int64
	// UploadedBytes is what the checkpoint wrote to the checkpoint
	// storage: its state files and the shared files uploaded for it; the
	// shared files it reuses from earlier checkpoints are not counted (nor
	// its small metadata). For full snapshots it equals StateBytes.
	UploadedBytes int64
}

// newCheckpointStats describes the checkpoint md, completed at completed.
func newCheckpointStats(md *checkpoint.Metadata, completed time.Time) *CheckpointStats {
	s := &CheckpointStats{ID: md.ID, Triggered: md.Triggered, Completed: completed, StateBytes: md.StateBytes()}
	s.UploadedBytes = s.StateBytes
	seen := map[string]bool{}
	for _, op := range md.Operators {
		for _, h := range op.Subtasks {
			for _, f := range h.Shared {
				if seen[f.Name] {
					continue
				}
				seen[f.Name] = true
				s.SharedBytes += f.Size
				if id, ok := format.SharedID(f.Name); ok && id == md.ID {
					s.UploadedBytes += f.Size
				}
			}
		}
	}
	return s
}

// SkippedCheckpoints returns how many completed checkpoints that did not
// verify were skipped at restore under [Options].SkipCorruptCheckpoints.
func (m *Metrics) SkippedCheckpoints() int64 {
	if m.skipped == nil {
		return 0
	}
	return m.skipped()
}

// Records returns the number of records the named operator handled, summed
// over its subtasks and attempts.
func (m *Metrics) Records(operator string) int64 {
	return load(&m.records, operator)
}

// LateRecords returns the number of records the named event-time operator
// found too late, the watermark having passed their time (by more than a
// window's allowed lateness): dropped, or sent to a side output. Summed
// over its subtasks and attempts.
func (m *Metrics) LateRecords(operator string) int64 {
	return load(&m.late, operator)
}

// RecordsByOperator returns Records of every operator.
func (m *Metrics) RecordsByOperator() map[string]int64 { return counts(&m.records) }

// LateRecordsByOperator returns LateRecords of every operator (0 for those
// without event time).
func (m *Metrics) LateRecordsByOperator() map[string]int64 { return counts(&m.late) }

func counts(counters *sync.Map) map[string]int64 {
	out := map[string]int64{}
	counters.Range(func(op, c any) bool {
		out[op.(string)] = c.(*atomic.Int64).Load()
		return true
	})
	return out
}

// load returns the count of name in counters, 0 if there is none.
func load(counters *sync.Map, name string) int64 {
	if c, ok := counters.Load(name); ok {
		return c.(*atomic.Int64).Load()
	}
	return 0
}

func counter(counters *sync.Map, operator string) *atomic.Int64 {
	c, _ := counters.LoadOrStore(operator, new(atomic.Int64))
	return c.(*atomic.Int64)
}
