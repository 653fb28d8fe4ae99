package stream_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
	"go.uber.org/goleak"
)

// ttlProbe is what the TTL job emits from a timer: whether record V's
// values were still there When.
type ttlProbe struct {
	V     int
	When  time.Time
	Event bool // the value with an event-time TTL
	Proc  bool // the value with a processing-time TTL (an hour: never expires here)
}

const probeTTL = 2 * time.Second

// ttlJob: source (event time = value in ms, one split) -> check -> keyBy(v)
// -> a process that stores v in two values with TTLs and registers
// event-time timers probeTTL/2 and 2*probeTTL later, which emit whether
// the values are still there.
func ttlJob(n int, out *memSink[ttlProbe], check func(int) error) *stream.Job {
	j := stream.New("ttl")
	nums := stream.SourceWithEventTime(j, "numbers", counting{n: n, splits: 1, delay: time.Millisecond},
		stream.EventTime[int]{Timestamp: millis})
	nums = stream.Filter(nums, func(v int) bool {
		if err := check(v); err != nil {
			panic(err) // fails the task; the job restarts
		}
		return true
	})
	keyed := stream.KeyBy(nums, func(v int) int64 { return int64(v) }, state.Int64Codec{})
	probes := stream.Process(keyed, "probe", func(ctx *stream.Context[int64]) (stream.ProcessFunc[int64, int, ttlProbe], error) {
		ev, err := state.NewValueState[int64, int64](ctx.State(), "event", state.Int64Codec{},
			state.WithTTL(state.TTL{After: probeTTL}))
		if err != nil {
			return stream.ProcessFunc[int64, int, ttlProbe]{}, err
		}
		proc, err := state.NewValueState[int64, int64](ctx.State(), "proc", state.Int64Codec{},
			state.WithTTL(state.TTL{After: time.Hour, Time: state.TTLProcessingTime}))
		if err != nil {
			return stream.ProcessFunc[int64, int, ttlProbe]{}, err
		}
		return stream.ProcessFunc[int64, int, ttlProbe]{
			Process: func(ctx *stream.Context[int64], v int, _ *stream.Output[ttlProbe]) error {
				ev.Update(int64(v))
				proc.Update(int64(v))
				ctx.RegisterEventTimer(millis(v).Add(probeTTL / 2))
				ctx.RegisterEventTimer(millis(v).Add(2 * probeTTL))
				return nil
			},
			OnEventTimer: func(ctx *stream.Context[int64], when time.Time, out *stream.Output[ttlProbe]) error {
				_, e := ev.Value()
				_, p := proc.Value()
				out.Emit(ttlProbe{V: int(ctx.Key()), When: when, Event: e, Proc: p})
				return nil
			},
		}, nil
	}, stream.Parallelism(2))
	stream.SinkTo(probes, "out", out)
	return j
}

// TestTTLFailoverExactlyOnce runs the TTL job with a failure in the
// middle of its input, on both backends. Event-time TTL makes the probes
// independent of the failure and of where watermarks fall: a value is
// there TTL/2 after it was written and gone 2*TTL after, also for the
// probes the final watermark fires all at once (each timer runs at its
// own time), and each probe is committed once.
func TestTTLFailoverExactlyOnce(t *testing.T) {
	for _, backend := range []string{"heap", "pebble"} {
		t.Run(backend, func(t *testing.T) {
			defer goleak.VerifyNone(t)
			const n = 6000
			out := newMemSink[ttlProbe]()
			var failed atomic.Bool
			j := ttlJob(n, out, func(v int) error {
				if v == 4000 && failed.CompareAndSwap(false, true) {
					return errors.New("injected failure")
				}
				return nil
			})
			if backend == "pebble" {
				j.SetStateBackend(pebbleBackend(t))
			}
			r, err := j.Start(context.Background(), stream.Options{
				CheckpointDir:      t.TempDir(),
				CheckpointInterval: 10 * time.Millisecond,
				WatermarkInterval:  time.Millisecond,
				Restart:            stream.RestartStrategy{InitialBackoff: time.Millisecond},
			})
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Wait(); err != nil {
				t.Fatal(err)
			}
			if !failed.Load() || r.Metrics().Restarts.Load() != 1 {
				t.Fatalf("failed=%v restarts=%d: the injected failure did not happen once", failed.Load(), r.Metrics().Restarts.Load())
			}
			type probe struct {
				v     int
				early bool
			}
			seen := map[probe]bool{}
			for _, p := range out.Visible() {
				early := p.When.Equal(millis(p.V).Add(probeTTL / 2))
				if !early && !p.When.Equal(millis(p.V).Add(2*probeTTL)) {
					t.Fatalf("probe of %d at %v: not one of its timers", p.V, p.When)
				}
				k := probe{p.V, early}
				if seen[k] {
					t.Fatalf("probe %+v committed twice", k)
				}
				seen[k] = true
				if p.Event != early || !p.Proc {
					t.Errorf("probe of %d at +%v: event-time value there %v, processing-time value there %v; want %v, true",
						p.V, p.When.Sub(millis(p.V)), p.Event, p.Proc, early)
				}
			}
			if len(seen) != 2*n {
				t.Fatalf("%d probes committed, want %d", len(seen), 2*n)
			}
		})
	}
}
