package nexmark

import (
	"bytes"
	"fmt"
	"iter"
	"math"
	"strconv"
)

// q11 (user sessions), of Flink's Nexmark suite, is windowed on event time
// too: per bidder, its bids in session windows of Q11Gap — a bid at t
// opens [t, t+Q11Gap), and a bidder's overlapping windows merge — as
// "bidder,count,start,end": the number of bids, the first bid's dateTime
// and the last's plus Q11Gap (Flink's SESSION_END), once per session when
// the watermark passes its end. Its checked outputs are the sessions
// ending at or before Cutoff, as for q5 and q7.
const Q11Gap = 10_000

// AppendQ11 appends the q11 output of a session of bidder.
func AppendQ11(dst []byte, bidder, count, start, end int64) []byte {
	return appendFields(dst, bidder, count, start, end)
}

// UserSessions is the reference q11. bids must come in non-decreasing
// DateTime order. It calls emit with every session ending at or before
// upTo, in no particular order.
func UserSessions(bids iter.Seq[Bid], upTo int64, emit func(bidder, count, start, end int64)) error {
	type session struct{ count, start, last int64 }
	open := map[int64]session{}
	o := ordered{last: math.MinInt64}
	for b := range bids {
		if err := o.check(b); err != nil {
			return err
		}
		s, ok := open[b.Bidder]
		if ok && b.DateTime < s.last+Q11Gap {
			s.count, s.last = s.count+1, b.DateTime
		} else {
			if ok && s.last+Q11Gap <= upTo {
				emit(b.Bidder, s.count, s.start, s.last+Q11Gap)
			}
			s = session{count: 1, start: b.DateTime, last: b.DateTime}
		}
		open[b.Bidder] = s
	}
	for bidder, s := range open {
		if s.last+Q11Gap <= upTo {
			emit(bidder, s.count, s.start, s.last+Q11Gap)
		}
	}
	return nil
}

// Windowed reports whether query q is windowed on event time: its
// outputs are final once the watermark passes their window's end, and a
// run checks those of the windows ending at or before Cutoff.
func Windowed(q string) bool {
	switch q {
	case "q5", "q7", "q8", "q11":
		return true
	}
	return false
}

// OutputEnd returns the end of the window of an output value of the
// windowed query q, in Unix ms: whether a run checks the output (see
// Cutoff).
func OutputEnd(q string, v []byte) (int64, error) {
	switch q {
	case "q5", "q7":
		start, err := WindowStart(v)
		size, _, _ := Window(q)
		return start + size, err
	case "q8":
		i := bytes.LastIndexByte(v, ',')
		start, err := strconv.ParseInt(string(v[i+1:]), 10, 64)
		if i < 0 || err != nil {
			return 0, fmt.Errorf("nexmark: not a q8 output: %q", v)
		}
		return start + Q8Size, nil
	case "q11":
		i := bytes.LastIndexByte(v, ',')
		end, err := strconv.ParseInt(string(v[i+1:]), 10, 64)
		if i < 0 || err != nil {
			return 0, fmt.Errorf("nexmark: not a q11 output: %q", v)
		}
		return end, nil
	}
	return 0, fmt.Errorf("nexmark: %q is not a windowed query", q)
}
