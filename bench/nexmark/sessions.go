package nexmark

import (
	"iter"
	"math"
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
