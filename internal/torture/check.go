package torture

import (
	"fmt"
	"strings"
)

// SinkResult is the checker's verdict on one sink. Every count but Records
// and Verified is an anomaly.
type SinkResult struct {
	// Sink names the sink.
	Sink string
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
	// Examples describes the first anomalies found.
	Examples []string
}

// Anomalies is the sum of every anomaly count.
func (r SinkResult) Anomalies() int {
	return r.Missing + r.Duplicates + r.OutOfOrder + r.WrongTotals + r.FinalTotals + r.StateGaps +
		r.Unexpected + r.AbortedVisible + r.Lingering
}

// String summarizes r on one line.
func (r SinkResult) String() string {
	verdict := "OK"
	if n := r.Anomalies(); n > 0 {
		verdict = fmt.Sprintf("FAIL (%d anomalies)", n)
	}
	return fmt.Sprintf("%-18s records %d, events verified %d; missing %d, duplicates %d, out of order %d, wrong totals %d, wrong final totals %d, state gaps %d, unexpected %d, aborted visible %d, lingering %d: %s",
		r.Sink, r.Records, r.Verified, r.Missing, r.Duplicates, r.OutOfOrder, r.WrongTotals, r.FinalTotals, r.StateGaps,
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
}

// NewExpected computes the expected output of w.
func NewExpected(w Workload) *Expected {
	x := &Expected{events: w.Generate(), final: map[string]int64{}}
	x.running = make([]int64, len(x.events))
	for i, e := range x.events {
		x.final[e.Key] += e.Amount
		x.running[i] = x.final[e.Key]
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

// parseStream decodes lines of appendOut's encoding, counting and
// describing malformed ones in res.
func parseStream(res *SinkResult, lines []string) []Out {
	out := make([]Out, 0, len(lines))
	for _, l := range lines {
		o, err := parseOut(strings.TrimSpace(l))
		if err != nil {
			res.Records++
			res.Unexpected++
			res.example("malformed record: %v", err)
			continue
		}
		out = append(out, o)
	}
	return out
}
