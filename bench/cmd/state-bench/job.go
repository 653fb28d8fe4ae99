package main

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// workload is the keyed job's input: events over a keyspace that grows.
// Of every 1+UpdatesPerInsert events the first inserts the next new key
// and the others update keys chosen uniformly among those inserted so
// far; every event writes its key's value, ValueBytes of random bytes. The
// Flink peer (bench/peers/flink, StateBench.java) generates the same.
type workload struct {
	// Keys is the number of keys inserted: the state's logical size is
	// Keys × ValueBytes.
	Keys uint64
	// UpdatesPerInsert is the number of updates after each insert.
	UpdatesPerInsert uint64
	// ValueBytes is the size of every value, at least 8.
	ValueBytes int
	// Seed makes the updated keys and the values reproducible.
	Seed uint64
}

// events is the number of events of the workload.
func (w workload) events() uint64 { return w.Keys * (1 + w.UpdatesPerInsert) }

// event is one input record: write key's value for the seq-th time in
// the input (seq is the event's index).
type event struct {
	Key, Seq uint64
}

// at returns event i: key n for the first event of block n, else a key
// drawn from [0, n].
func (w workload) at(i uint64) event {
	block := 1 + w.UpdatesPerInsert
	n := i / block
	if i%block == 0 {
		return event{Key: n, Seq: i}
	}
	return event{Key: generator.Rand(w.Seed, i).Uint64N(n + 1), Seq: i}
}

// value returns the value event e writes: ValueBytes of random bytes (so
// that no compression shrinks the state) led by the number of writes of
// the key so far, writes.
func (w workload) value(e event, writes uint64) []byte {
	v := make([]byte, w.ValueBytes)
	r := rand.NewPCG(w.Seed^e.Key, e.Seq)
	for i := 8; i < len(v); i += 8 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], r.Uint64())
		copy(v[i:], b[:])
	}
	binary.LittleEndian.PutUint64(v, writes)
	return v
}

// jobConfig is what a run of the keyed job needs besides the workload.
type jobConfig struct {
	// Backend is "pebble" or "heap".
	Backend string
	// StateDir is the Pebble backend's directory.
	StateDir string
	// MemoryBudget is the Pebble backend's memory budget per subtask.
	MemoryBudget int64
	// Memory, when set, is the budget the subtasks share instead.
	Memory *state.Memory
	// Downloads is the number of shared files a subtask's restore
	// downloads at a time.
	Downloads int
	// Parallelism of the source and of the keyed operator.
	Parallelism int
	// Rate limits the events per second; 0 means as fast as possible.
	Rate float64
	// Events is the number of events the source generates.
	Events uint64
	// Timers makes each insert register a processing-time timer for its
	// key a year ahead, which never fires: the pending timers grow with
	// the keys.
	Timers bool
}

// keyedOp names the keyed operator, whose record count is the throughput.
const keyedOp = "state"

// buildJob returns the keyed job: generator → KeyBy(key) → a Process that
// reads and writes each key's value and emits nothing (no sink: the job
// measures the state, not the output).
func buildJob(w workload, c jobConfig) (*stream.Job, error) {
	src, err := generator.New(generator.Options{Count: c.Events, Splits: 4 * c.Parallelism, Rate: c.Rate}, w.at)
	if err != nil {
		return nil, err
	}
	j := stream.New("state-bench")
	switch c.Backend {
	case "pebble":
		j.SetStateBackend(state.BackendConfig{Kind: state.PebbleBackend, Dir: filepath.Clean(c.StateDir), MemoryBudget: c.MemoryBudget, Memory: c.Memory, DownloadConcurrency: c.Downloads})
	case "heap":
		j.SetStateBackend(state.BackendConfig{DownloadConcurrency: c.Downloads})
	default:
		return nil, fmt.Errorf("--state is %q: use pebble or heap", c.Backend)
	}
	events := stream.Source(j, "events", src, stream.Parallelism(c.Parallelism))
	byKey := stream.KeyBy(events, func(e event) uint64 { return e.Key }, state.Uint64Codec{})
	stream.Process(byKey, keyedOp, func(ctx *stream.Context[uint64]) (stream.ProcessFunc[uint64, event, struct{}], error) {
		values, err := state.NewValueState(ctx.State(), "value", state.BytesCodec{})
		if err != nil {
			return stream.ProcessFunc[uint64, event, struct{}]{}, err
		}
		return stream.ProcessFunc[uint64, event, struct{}]{
			Process: func(ctx *stream.Context[uint64], e event, _ *stream.Output[struct{}]) error {
				var n uint64
				if old, ok := values.Value(); ok {
					n = binary.LittleEndian.Uint64(old)
				} else if c.Timers {
					ctx.RegisterTimer(time.Now().Add(365 * 24 * time.Hour))
				}
				values.Update(w.value(e, n+1))
				return nil
			},
		}, nil
	}, stream.Parallelism(c.Parallelism))
	return j, nil
}
