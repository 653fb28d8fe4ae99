// Package torture is the fault-injection suite that tests the engine's
// exactly-once claim end to end against real services: a deterministic
// workload loaded into Kafka, a job with keyed state writing to Kafka
// (exactly-once), PostgreSQL (fenced and prepared) and files, run in a child
// process under a seeded schedule of faults (SIGKILLs of the job at protocol
// points, broker and database restarts, network faults through toxiproxy,
// an unwritable or full checkpoint directory), then a strict checker that
// reads every sink and a report. A second branch of the job aggregates the
// events per key in event-time windows into a fifth, windowed Kafka sink,
// checked window by window. `exactly torture` runs it; see
// docs/reliability.md.
package torture

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// Event is one input event: a unique id, its key, its sequence number
// within the key (1, 2, ...) and an amount. Its event time is derived from
// its id ([Event.Time]).
type Event struct {
	ID     int64
	Key    string
	Seq    int64
	Amount int64
}

// eventEpoch is the event time of event 0.
var eventEpoch = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

// Time returns e's event time: one millisecond per id after eventEpoch.
// The loader writes the input in id order and stamps each Kafka record
// with it, so every input partition is in event-time order.
func (e Event) Time() time.Time { return eventEpoch.Add(time.Duration(e.ID) * time.Millisecond) }

// windowSize is the length of the windowed branch's tumbling event-time
// windows: 500 events of the input each.
const windowSize = 500 * time.Millisecond

// WindowOut is what the windowed branch writes per key and event-time
// window: the window's start (Unix milliseconds), the key, and the number
// and the sum of the amounts of the key's events in the window.
type WindowOut struct {
	Start int64
	Key   string
	Count int64
	Sum   int64
}

// Out is what the job writes for each event: the event, the key's running
// total including it, and the number of sequence anomalies (a gap or a
// repeat) the job's keyed state has seen for the key so far. Exactly-once
// processing keeps Gaps at 0.
type Out struct {
	Event
	Total int64
	Gaps  int64
}

// Workload is the deterministic input: Events events over Keys keys,
// derived from Seed.
type Workload struct {
	Events int
	Keys   int
	Seed   uint64
}

// Generate returns the workload's events in id order, with per-key
// sequence numbers.
func (w Workload) Generate() []Event {
	evs := make([]Event, w.Events)
	seq := make([]int64, w.Keys)
	for i := range evs {
		r := generator.Rand(w.Seed, uint64(i))
		k := r.IntN(w.Keys)
		seq[k]++
		evs[i] = Event{ID: int64(i), Key: keyName(k), Seq: seq[k], Amount: 1 + r.Int64N(1000)}
	}
	return evs
}

// keyName names key k.
func keyName(k int) string { return fmt.Sprintf("k%05d", k) }

// appendEvent encodes e as "id,key,seq,amount".
func appendEvent(dst []byte, e Event) []byte { return appendInts(dst, e.Key, e.ID, e.Seq, e.Amount) }

// appendOut encodes o as "id,key,seq,amount,total,gaps".
func appendOut(dst []byte, o Out) []byte {
	return appendInts(dst, o.Key, o.ID, o.Seq, o.Amount, o.Total, o.Gaps)
}

// appendWindow encodes w as "start,key,count,sum".
func appendWindow(dst []byte, w WindowOut) []byte {
	return appendInts(dst, w.Key, w.Start, w.Count, w.Sum)
}

// appendInts encodes nums at commas with key as the second field: what
// parseInts decodes.
func appendInts(dst []byte, key string, nums ...int64) []byte {
	for i, n := range nums {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, n, 10)
		if i == 0 {
			dst = append(dst, ',')
			dst = append(dst, key...)
		}
	}
	return dst
}

// parseInts splits s at commas into want fields and parses every field
// but the second (the key) as an integer.
func parseInts(s string, want int) (key string, nums []int64, err error) {
	f := strings.Split(s, ",")
	if len(f) != want {
		return "", nil, fmt.Errorf("%q has %d fields, want %d", s, len(f), want)
	}
	for i, x := range f {
		if i == 1 {
			continue
		}
		n, err := strconv.ParseInt(x, 10, 64)
		if err != nil {
			return "", nil, fmt.Errorf("%q: field %d: %w", s, i+1, err)
		}
		nums = append(nums, n)
	}
	return f[1], nums, nil
}

// parseEvent decodes appendEvent's encoding.
func parseEvent(s string) (Event, error) {
	key, n, err := parseInts(s, 4)
	if err != nil {
		return Event{}, err
	}
	return Event{ID: n[0], Key: key, Seq: n[1], Amount: n[2]}, nil
}

// parseOut decodes appendOut's encoding.
func parseOut(s string) (Out, error) {
	key, n, err := parseInts(s, 6)
	if err != nil {
		return Out{}, err
	}
	return Out{Event: Event{ID: n[0], Key: key, Seq: n[1], Amount: n[2]}, Total: n[3], Gaps: n[4]}, nil
}

// parseWindow decodes appendWindow's encoding.
func parseWindow(s string) (WindowOut, error) {
	key, n, err := parseInts(s, 4)
	if err != nil {
		return WindowOut{}, err
	}
	return WindowOut{Start: n[0], Key: key, Count: n[1], Sum: n[2]}, nil
}

// Totals keeps per key the running total and the last sequence number in
// keyed state, and counts sequence anomalies: an event whose sequence
// number is not the last one plus one (a gap: an event lost; a repeat: an
// event processed twice) increments the key's Gaps.
func Totals(events stream.Stream[Event], parallelism int) stream.Stream[Out] {
	keyed := stream.KeyBy(events, func(e Event) string { return e.Key }, state.StringCodec{})
	return stream.Process(keyed, "totals", func(ctx *stream.Context[string]) (stream.ProcessFunc[string, Event, Out], error) {
		total, err1 := state.NewValueState(ctx.State(), "total", state.Int64Codec{})
		last, err2 := state.NewValueState(ctx.State(), "last-seq", state.Int64Codec{})
		gaps, err3 := state.NewValueState(ctx.State(), "gaps", state.Int64Codec{})
		return stream.ProcessFunc[string, Event, Out]{
			Process: func(ctx *stream.Context[string], e Event, out *stream.Output[Out]) error {
				t, _ := total.Value()
				l, _ := last.Value()
				g, _ := gaps.Value()
				if e.Seq != l+1 {
					g++
					gaps.Update(g)
				}
				t += e.Amount
				total.Update(t)
				last.Update(max(l, e.Seq))
				out.Emit(Out{Event: e, Total: t, Gaps: g})
				return nil
			},
		}, errors.Join(err1, err2, err3)
	}, stream.Parallelism(parallelism))
}

// windowAcc is the accumulator of a window of [Windows].
type windowAcc struct{ Count, Sum int64 }

// Windows counts the events of each key and sums their amounts per
// tumbling event-time window of windowSize: one WindowOut per key and
// window that has events, emitted when the watermark passes the window's
// end. The windows are aligned to the Unix epoch, as eventEpoch is.
func Windows(events stream.Stream[Event], parallelism int) stream.Stream[WindowOut] {
	keyed := stream.KeyBy(events, func(e Event) string { return e.Key }, state.StringCodec{})
	return stream.WindowAggregate(keyed, "windows", stream.Tumbling(windowSize), Event.Time,
		stream.Aggregate[string, Event, windowAcc, WindowOut]{
			Add: func(a windowAcc, e Event) windowAcc { return windowAcc{Count: a.Count + 1, Sum: a.Sum + e.Amount} },
			Result: func(key string, w stream.Window, a windowAcc) WindowOut {
				return WindowOut{Start: w.Start.UnixMilli(), Key: key, Count: a.Count, Sum: a.Sum}
			},
			Codec: state.JSONCodec[windowAcc]{},
		}, stream.Parallelism(parallelism))
}
