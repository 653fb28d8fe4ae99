package stream

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/source"
	"github.com/exactlyonce/exactly/state"
)

// The harness drives the subtasks of a keyed operator of a job by hand,
// without the runtime: records go to the subtask owning their key group,
// watermarks to every subtask, and a checkpoint snapshots them all and
// restores them, possibly with another parallelism, as a restart would.

// harnessMaxParallelism is the harness's number of key groups.
const harnessMaxParallelism = 16

// collector is an emitter that keeps every record of type T.
type collector[T any] struct{ got []T }

func (c *collector[T]) Emit(batch any) error {
	b, ok := batch.([]T)
	if !ok {
		return fmt.Errorf("collector: got %T", batch)
	}
	c.got = append(c.got, b...)
	return nil
}

// harness runs operator op of job j with the records of type IN keyed by
// key; main collects its output, side its side output 1 when it has one.
type harness[K comparable, IN, OUT, SIDE any] struct {
	t       *testing.T
	j       *Job
	op      int
	key     func(IN) K
	codec   state.Codec[K]
	backend state.BackendConfig
	subs    []runtime.Operator
	main    collector[OUT]
	side    collector[SIDE]
	late    atomic.Int64
	ckpt    checkpoint.ID
}

// nullSource is a source that a harness never runs.
type nullSource[T any] struct{ source.Source[T] }

// newHarness returns a harness for the keyed operator that build adds to a
// job reading records of type IN, started with parallelism subtasks.
func newHarness[K comparable, IN, OUT, SIDE any](t *testing.T, key func(IN) K, codec state.Codec[K], backend state.BackendKind, parallelism int,
	build func(KeyedStream[K, IN]) Stream[OUT]) *harness[K, IN, OUT, SIDE] {
	j := New("harness")
	ks := KeyBy(Source(j, "in", source.Source[IN](nullSource[IN]{})), key, codec)
	return startHarness[K, IN, OUT, SIDE](t, j, build(ks), key, codec, backend, parallelism)
}

// newCoHarness returns a harness for the two-input keyed operator that
// build adds to a job reading records of types A and B; send it records
// with first and second.
func newCoHarness[K comparable, A, B, OUT, SIDE any](t *testing.T, keyA func(A) K, keyB func(B) K, codec state.Codec[K], backend state.BackendKind, parallelism int,
	build func(KeyedStream[K, A], KeyedStream[K, B]) Stream[OUT]) *harness[K, either[A, B], OUT, SIDE] {
	j := New("harness")
	ka := KeyBy(Source(j, "in1", source.Source[A](nullSource[A]{})), keyA, codec)
	kb := KeyBy(Source(j, "in2", source.Source[B](nullSource[B]{})), keyB, codec)
	key := func(v either[A, B]) K {
		if v.second {
			return keyB(v.b)
		}
		return keyA(v.a)
	}
	return startHarness[K, either[A, B], OUT, SIDE](t, j, build(ka, kb), key, codec, backend, parallelism)
}

// first and second are records of the first and second input of a
// two-input operator.
func first[A, B any](a A) either[A, B]  { return either[A, B]{a: a} }
func second[A, B any](b B) either[A, B] { return either[A, B]{b: b, second: true} }

// startHarness starts the harness of the operator producing s.
func startHarness[K comparable, IN, OUT, SIDE any](t *testing.T, j *Job, s Stream[OUT], key func(IN) K, codec state.Codec[K], backend state.BackendKind, parallelism int) *harness[K, IN, OUT, SIDE] {
	h := &harness[K, IN, OUT, SIDE]{t: t, j: j, op: s.op, key: key, codec: codec}
	if backend == state.PebbleBackend {
		h.backend = state.BackendConfig{Kind: backend, Dir: filepath.Join(t.TempDir(), "pebble")}
	}
	if len(j.errs) > 0 {
		t.Fatalf("building the job: %v", j.errs)
	}
	h.start(parallelism, nil)
	t.Cleanup(func() { h.close() })
	return h
}

// start creates the subtasks, restored from snaps when it is not nil.
func (h *harness[K, IN, OUT, SIDE]) start(parallelism int, snaps []checkpoint.SubtaskSnapshot) {
	h.j.stateBackend = h.backend
	nd := h.j.nodes[h.op]
	h.subs = nil
	for s := range parallelism {
		oc := runtime.OperatorContext{
			Job: "harness", Operator: nd.spec.Name, Subtask: s, Parallelism: parallelism,
			MaxParallelism: harnessMaxParallelism, KeyGroups: state.RangeForSubtask(s, parallelism, harnessMaxParallelism),
			BatchSize: 4, Records: new(atomic.Int64), LateRecords: &h.late,
		}
		for range nd.spec.SideOutputs {
			oc.SideOutputs = append(oc.SideOutputs, &h.side)
		}
		if snaps != nil {
			oc.Restored = &checkpoint.SubtaskSnapshot{KeyGroups: map[int][]byte{}}
			for _, snap := range snaps {
				for kg, blob := range snap.KeyGroups {
					if oc.KeyGroups.Contains(kg) {
						oc.Restored.KeyGroups[kg] = blob
					}
				}
				oc.Restored.Entries = append(oc.Restored.Entries, snap.Entries...)
			}
		}
		op, err := nd.spec.New(context.Background(), oc, &h.main)
		if err != nil {
			h.t.Fatalf("creating subtask %d: %v", s, err)
		}
		if r, ok := op.(runtime.StateRestorer); ok {
			if err := r.RestoreState(context.Background()); err != nil {
				h.t.Fatalf("restoring subtask %d: %v", s, err)
			}
		}
		h.subs = append(h.subs, op)
	}
}

func (h *harness[K, IN, OUT, SIDE]) close() {
	for _, op := range h.subs {
		if err := op.(runtime.Closer).Close(context.Background(), 0, false); err != nil {
			h.t.Errorf("close: %v", err)
		}
	}
	h.subs = nil
}

// record sends v to the subtask that owns its key.
func (h *harness[K, IN, OUT, SIDE]) record(v IN) {
	h.t.Helper()
	kg := state.KeyGroupOf(state.HashKey(h.codec.Append(nil, h.key(v))), harnessMaxParallelism)
	s := kg * len(h.subs) / harnessMaxParallelism
	if err := h.subs[s].Process(context.Background(), []IN{v}); err != nil {
		h.t.Fatalf("record %v: %v", v, err)
	}
}

// watermark sends the watermark wm (UnixNano) to every subtask.
func (h *harness[K, IN, OUT, SIDE]) watermark(wm int64) {
	h.t.Helper()
	for _, op := range h.subs {
		if err := op.(runtime.WatermarkOperator).Watermark(context.Background(), wm); err != nil {
			h.t.Fatalf("watermark %v: %v", time.Unix(0, wm), err)
		}
	}
}

// restart snapshots every subtask, closes them and starts parallelism
// subtasks restored from the snapshots.
func (h *harness[K, IN, OUT, SIDE]) restart(parallelism int) {
	h.t.Helper()
	h.ckpt++
	var snaps []checkpoint.SubtaskSnapshot
	for _, op := range h.subs {
		encode, err := op.(runtime.KindSnapshotter).SnapshotKind(context.Background(), h.ckpt, checkpoint.KindCheckpoint)
		if err != nil {
			h.t.Fatalf("snapshot: %v", err)
		}
		snap, err := encode()
		if err != nil {
			h.t.Fatalf("encoding the snapshot: %v", err)
		}
		snaps = append(snaps, snap)
	}
	h.close()
	h.start(parallelism, snaps)
}

// stateEmpty reports whether no subtask holds keyed state or timers.
func (h *harness[K, IN, OUT, SIDE]) stateEmpty() bool {
	h.t.Helper()
	for _, op := range h.subs {
		blobs, err := op.(interface {
			stateBlobs() (map[int][]byte, error)
		}).stateBlobs()
		if err != nil {
			h.t.Fatalf("snapshot: %v", err)
		}
		if len(blobs) > 0 {
			return false
		}
	}
	return true
}

// stateBlobs encodes the operator's keyed state and timers per key group,
// leaving out the key groups without any.
func (p *processOp[K, IN, OUT]) stateBlobs() (map[int][]byte, error) {
	return p.ctx.backend.Snapshot()()
}
