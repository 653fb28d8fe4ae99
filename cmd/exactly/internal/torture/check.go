package torture

import (
	"fmt"
	"strings"
)

// What a sink's records are checked as: see SinkResult.Unit.
const (
	unitEvents  = "events"
	unitWindows = "windows"
)

// SinkResult is the checker's verdict on one sink. Every count but Records
// and Verified is an anomaly.
type SinkResult struct {
	// Sink names the sink.
	Sink string
	// Unit is what the sink's records are checked as: "events" (one record
	// per input event, as [Expected.Check] does; "" means this) or
	// "windows" (one record per key and event-time window, as
	// [Expected.CheckWindows] does). For windows, Verified, Missing and
	// Duplicates count windows, WrongTotals counts windows whose count or
	// sum is wrong, and FinalTotals and StateGaps do not apply.
	Unit string
	// Records counts the records read from the committed output.
	Records int
	// Verified counts the events found in the output, each counted once.
	Verified int
	// Missing counts events absent from the output.
	Missing int
	// Duplicates counts records beyond the first of an event.
	Duplicates int
	// OutOfOrder counts records whose sequence number is below that of an
	// earlier record of the same key in the same ordered stream (a Kafka
	// partition, a subtask's files, a table's insertion order).
	OutOfOrder int
	// WrongTotals counts records whose running total differs from the one
	// computed from the input.
	WrongTotals int
	// FinalTotals counts keys whose last record's total differs from the
	// key's expected final total (or that have no record).
	FinalTotals int
	// StateGaps counts records on which the job's keyed state had seen a
	// sequence gap or repeat.
	StateGaps int
	// Unexpected counts records that match no input event or are malformed.
	Unexpected int
	// AbortedVisible counts records of aborted or still open transactions
	// that a read_committed reader sees.
	AbortedVisible int
	// Lingering counts transactions, staging tables or files left
	// uncommitted after the job ended.
	Lingering int
	// Reproduced counts the committed records of a Kafka sink that carry
	// kafka.ReproducesHeader: written again after the broker had aborted
	// their transaction (FaultTxnOutage). Not an anomaly.
	Reproduced int
	// Examples describes the first anomalies found.
	Examples []string
}

// Anomalies is the sum of every anomaly count.
func (r SinkResult) Anomalies() int {
	return r.Missing + r.Duplicates + r.OutOfOrder + r.WrongTotals + r.FinalTotals + r.StateGaps +
		r.Unexpected + r.AbortedVisible + r.Lingering
}

// unit returns r.Unit, "events" when empty.
func (r SinkResult) unit() string {
	if r.Unit == "" {
		return unitEvents
	}
	return r.Unit
}

// String summarizes r on one line.
func (r SinkResult) String() string {
	verdict := "OK"
	if n := r.Anomalies(); n > 0 {
		verdict = fmt.Sprintf("FAIL (%d anomalies)", n)
	}
	values := fmt.Sprintf("wrong totals %d, wrong final totals %d, state gaps %d", r.WrongTotals, r.FinalTotals, r.StateGaps)
	if r.unit() == unitWindows {
		values = fmt.Sprintf("wrong values %d", r.WrongTotals)
	}
	reproduced := ""
	if r.Reproduced > 0 {
		reproduced = fmt.Sprintf(" (%d reproduced after the broker aborted their transaction)", r.Reproduced)
	}
	return fmt.Sprintf("%-18s records %d%s, %s verified %d; missing %d, duplicates %d, out of order %d, %s, unexpected %d, aborted visible %d, lingering %d: %s",
		r.Sink, r.Records, reproduced, r.unit(), r.Verified, r.Missing, r.Duplicates, r.OutOfOrder, values,
		r.Unexpected, r.AbortedVisible, r.Lingering, verdict)
}

// example records an anomaly's description, keeping the first few.
func (r *SinkResult) example(format string, args ...any) {
	if len(r.Examples) < 8 {
		r.Examples = append(r.Examples, fmt.Sprintf(format, args...))
	}
}

// Expected is what a correct run writes, derived from the workload.
type Expected struct {
	events  []Event
	running []int64          // running total of the event's key including it
	final   map[string]int64 // each key's final total
	windows []WindowOut      // the windowed branch's output, by start, then first event
	window  map[windowID]int // index in windows
}

// windowID identifies a window of a key.
type windowID struct {
	key   string
	start int64
}

// NewExpected computes the expected output of w.
func NewExpected(w Workload) *Expected {
	x := &Expected{events: w.Generate(), final: map[string]int64{}, window: map[windowID]int{}}
	x.running = make([]int64, len(x.events))
	size := windowSize.Milliseconds()
	for i, e := range x.events {
		x.final[e.Key] += e.Amount
		x.running[i] = x.final[e.Key]
		t := e.Time().UnixMilli()
		id := windowID{e.Key, t - t%size}
		k, ok := x.window[id]
		if !ok {
			k = len(x.windows)
			x.window[id] = k
			x.windows = append(x.windows, WindowOut{Start: id.start, Key: e.Key})
		}
		x.windows[k].Count++
		x.windows[k].Sum += e.Amount
	}
	return x
}

// Check verifies the committed output of one sink, given as ordered
// streams (records of one key are expected in sequence order within a
// stream), against x. res may carry counts found by the sink's reader
// (aborted visible, lingering) and is completed.
func (x *Expected) Check(res SinkResult, streams [][]Out) SinkResult {
	seen := make([]int, len(x.events))
	last := map[string]Out{} // the record of the highest sequence seen per key
	for _, s := range streams {
		order := map[string]int64{} // highest sequence seen per key in this stream
		for _, o := range s {
			res.Records++
			if o.ID < 0 || o.ID >= int64(len(x.events)) || o.Event != x.events[o.ID] {
				res.Unexpected++
				res.example("unexpected record %+v", o)
				continue
			}
			seen[o.ID]++
			if seen[o.ID] > 1 {
				res.Duplicates++
				res.example("duplicate of event %d (key %s seq %d), copy %d", o.ID, o.Key, o.Seq, seen[o.ID])
				continue
			}
			if o.Seq < order[o.Key] {
				res.OutOfOrder++
				res.example("event %d: key %s seq %d after seq %d", o.ID, o.Key, o.Seq, order[o.Key])
			}
			order[o.Key] = max(order[o.Key], o.Seq)
			if o.Total != x.running[o.ID] {
				res.WrongTotals++
				res.example("event %d: total %d, want %d", o.ID, o.Total, x.running[o.ID])
			}
			if o.Gaps != 0 {
				res.StateGaps++
				res.example("event %d: keyed state of %s saw %d sequence gaps or repeats", o.ID, o.Key, o.Gaps)
			}
			if l, ok := last[o.Key]; !ok || o.Seq > l.Seq {
				last[o.Key] = o
			}
		}
	}
	for id, n := range seen {
		if n == 0 {
			res.Missing++
			res.example("event %d (key %s seq %d) missing", id, x.events[id].Key, x.events[id].Seq)
		} else {
			res.Verified++
		}
	}
	for key, want := range x.final {
		if got, ok := last[key]; !ok || got.Total != want {
			res.FinalTotals++
			res.example("key %s: final total %d (seq %d), want %d", key, got.Total, got.Seq, want)
		}
	}
	return res
}

// parseStreams decodes ordered streams of lines with parse (parseOut,
// parseWindow), counting and describing malformed lines in res.
func parseStreams[T any](res *SinkResult, streams [][]string, parse func(string) (T, error)) [][]T {
	out := make([][]T, len(streams))
	for i, lines := range streams {
		out[i] = make([]T, 0, len(lines))
		for _, l := range lines {
			v, err := parse(strings.TrimSpace(l))
			if err != nil {
				res.Records++
				res.Unexpected++
				res.example("malformed record: %v", err)
				continue
			}
			out[i] = append(out[i], v)
		}
	}
	return out
}
