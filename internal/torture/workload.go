// Package torture is the fault-injection suite that tests the engine's
// exactly-once claim end to end against real services: a deterministic
// workload loaded into Kafka, a job with keyed state writing to Kafka
// (exactly-once), PostgreSQL (fenced and prepared) and files, run in a child
// process under a seeded schedule of faults (SIGKILLs of the job at protocol
// points, broker and database restarts, network faults through toxiproxy,
// an unwritable or full checkpoint directory), then a strict checker that
// reads every sink and a report. `exactly torture` runs it; see
// docs/reliability.md.
package torture

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// Event is one input event: a unique id, its key, its sequence number
// within the key (1, 2, ...) and an amount.
type Event struct {
	ID     int64
	Key    string
	Seq    int64
	Amount int64
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
func appendEvent(dst []byte, e Event) []byte {
	dst = strconv.AppendInt(dst, e.ID, 10)
	dst = append(dst, ',')
	dst = append(dst, e.Key...)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, e.Seq, 10)
	dst = append(dst, ',')
	return strconv.AppendInt(dst, e.Amount, 10)
}

// appendOut encodes o as "id,key,seq,amount,total,gaps".
func appendOut(dst []byte, o Out) []byte {
	dst = appendEvent(dst, o.Event)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, o.Total, 10)
	dst = append(dst, ',')
	return strconv.AppendInt(dst, o.Gaps, 10)
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

// Totals keeps per key the running total and the last sequence number in
// keyed state, and counts sequence anomalies: an event whose sequence
// number is not the last one plus one (a gap: an event lost; a repeat: an
// event processed twice) increments the key's Gaps.
func Totals(events stream.Stream[Event], parallelism int) stream.Stream[Out] {
	keyed := stream.KeyBy(events, func(e Event) string { return e.Key }, state.StringCodec{})
	return stream.Process(keyed, "totals", func(ctx *stream.Context[string]) (stream.ProcessFunc[string, Event, Out], error) {
		total, err1 := state.NewValueState(ctx.Backend(), "total", state.Int64Codec{})
		last, err2 := state.NewValueState(ctx.Backend(), "last-seq", state.Int64Codec{})
		gaps, err3 := state.NewValueState(ctx.Backend(), "gaps", state.Int64Codec{})
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
