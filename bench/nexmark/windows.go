package nexmark

import (
	"bytes"
	"fmt"
	"iter"
	"maps"
	"math"
	"slices"
	"strconv"
)

// The windows of q5 and q7, in ms of event time.
const (
	// Q7Size is the size of q7's tumbling windows.
	Q7Size = 10_000
	// Q5Size is the size of q5's sliding windows, Q5Slide their period.
	Q5Size  = 10_000
	Q5Slide = 2_000
	// MaxOutOfOrderness is the disorder of bids the windowed queries
	// allow: the watermark trails the newest bid by it (Flink), or it is
	// the grace period of the windows (Kafka Streams).
	MaxOutOfOrderness = 1_000
	// CheckMargin is how far before the dateTime of the last input event
	// the last checked window ends (see Cutoff).
	CheckMargin = 3_000
)

// Window returns the size and the period of query q's windows, in ms; ok is
// false when q is not windowed.
func Window(q string) (size, slide int64, ok bool) {
	switch q {
	case "q5":
		return Q5Size, Q5Slide, true
	case "q7":
		return Q7Size, Q7Size, true
	}
	return 0, 0, false
}

// Cutoff returns the end of the last checked window of a run over events
// [0, n): the windows of q5 and q7 ending at or before it are checked, the
// later ones may or may not have fired. It is CheckMargin before the
// dateTime of event n-1, and math.MinInt64 when n is 0.
func Cutoff(n uint64) int64 {
	if n == 0 {
		return math.MinInt64
	}
	return DateTime(n-1) - CheckMargin
}

// WindowStart parses the windowStart of an output value of q5 or q7, its
// first field: with the size of the query's windows, it tells whether the
// output is one a run checks (see Cutoff).
func WindowStart(v []byte) (int64, error) {
	f, _, ok := bytes.Cut(v, []byte{','})
	if !ok {
		return 0, fmt.Errorf("nexmark: not a windowed output: %q", v)
	}
	start, err := strconv.ParseInt(string(f), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("nexmark: not a windowed output: %q: %v", v, err)
	}
	return start, nil
}

// CheckedOutputs calls emit with each output value of the windowed query q
// (q5 or q7) over events [from, to) of the stream seeded by seed whose window
// ends at or before Cutoff(to), window by window. The value is valid only
// during the call.
func CheckedOutputs(q string, seed, from, to uint64, emit func(v []byte)) error {
	var buf []byte
	switch q {
	case "q5":
		return HotItems(Bids(seed, from, to), Cutoff(to), func(start, auction, count int64) {
			buf = AppendQ5(buf[:0], start, auction, count)
			emit(buf)
		})
	case "q7":
		return HighestBids(Bids(seed, from, to), Cutoff(to), func(start int64, b Bid) {
			buf = AppendQ7(buf[:0], start, b)
			emit(buf)
		})
	case "q8":
		return NewUsers(seed, from, to, Cutoff(to), emit)
	case "q11":
		return UserSessions(Bids(seed, from, to), Cutoff(to), func(bidder, count, start, end int64) {
			buf = AppendQ11(buf[:0], bidder, count, start, end)
			emit(buf)
		})
	}
	return fmt.Errorf("nexmark: %q is not a windowed query", q)
}

// AppendQ7 appends the q7 output of bid b in the window starting at start.
func AppendQ7(dst []byte, start int64, b Bid) []byte {
	return appendFields(dst, start, b.Auction, b.Bidder, b.Price, b.DateTime)
}

// AppendQ5 appends the q5 output of auction, with count bids in the window
// starting at start.
func AppendQ5(dst []byte, start, auction, count int64) []byte {
	return appendFields(dst, start, auction, count)
}

// alignDown returns the greatest multiple of period at or before t.
func alignDown(t, period int64) int64 {
	r := t % period
	if r < 0 {
		r += period
	}
	return t - r
}

// ordered checks that bids come in non-decreasing DateTime order, which the
// reference implementations need to close windows as event time passes.
type ordered struct{ last int64 }

// check returns an error when b is older than the bid before it.
func (o *ordered) check(b Bid) error {
	if b.DateTime < o.last {
		return fmt.Errorf("nexmark: bid at %d after one at %d: bids must come in event-time order", b.DateTime, o.last)
	}
	o.last = b.DateTime
	return nil
}

// HighestBids is the reference q7. bids must come in non-decreasing
// DateTime order. For every window ending at or before upTo, in window order,
// it calls emit with the window's start and each bid at the window's highest
// price, in input order. It reads no bid past the first one at or after
// upTo, which no such window holds, and keeps one window's bids at a time.
func HighestBids(bids iter.Seq[Bid], upTo int64, emit func(start int64, b Bid)) error {
	var (
		start int64 // of the window of ties
		ties  []Bid // the bids at the highest price of that window so far
		o     = ordered{last: math.MinInt64}
	)
	flush := func() {
		if start+Q7Size <= upTo {
			for _, b := range ties {
				emit(start, b)
			}
		}
		ties = ties[:0]
	}
	for b := range bids {
		if err := o.check(b); err != nil {
			return err
		}
		if b.DateTime >= upTo {
			break
		}
		if s := alignDown(b.DateTime, Q7Size); s != start || len(ties) == 0 {
			flush()
			start = s
		}
		switch {
		case len(ties) == 0 || b.Price > ties[0].Price:
			ties = append(ties[:0], b)
		case b.Price == ties[0].Price:
			ties = append(ties, b)
		}
	}
	flush()
	return nil
}

// pane is the number of bids per auction in [start, start+Q5Slide): q5's
// windows are the unions of Q5Size/Q5Slide consecutive panes.
type pane struct {
	start  int64
	counts map[int64]int64
}

// HotItems is the reference q5. bids must come in non-decreasing DateTime
// order. For every window ending at or before upTo that holds a bid, in
// window order, it calls emit with the window's start and each auction with
// the most bids in the window, with that number, in auction order. It reads
// no bid past the first one at or after upTo, and keeps the bids per auction
// of one window's panes at a time.
func HotItems(bids iter.Seq[Bid], upTo int64, emit func(start, auction, count int64)) error {
	var (
		panes  []pane              // the panes with bids of the windows not emitted yet, oldest first
		next   int64               // start of the next window to emit
		counts = map[int64]int64{} // bids per auction in one window
		o      = ordered{last: math.MinInt64}
	)
	// emitUpTo emits the windows ending at or before end (and upTo).
	emitUpTo := func(end int64) {
		for ; next+Q5Size <= min(end, upTo); next += Q5Slide {
			for len(panes) > 0 && panes[0].start < next {
				panes = panes[1:]
			}
			if len(panes) == 0 {
				return // no bid in this window nor in the later ones so far
			}
			clear(counts)
			var most int64
			for _, p := range panes {
				if p.start >= next+Q5Size {
					break
				}
				for a, n := range p.counts {
					counts[a] += n
					most = max(most, counts[a])
				}
			}
			for _, a := range slices.Sorted(maps.Keys(counts)) {
				if counts[a] == most {
					emit(next, a, most)
				}
			}
		}
	}
	for b := range bids {
		if err := o.check(b); err != nil {
			return err
		}
		if b.DateTime >= upTo {
			break
		}
		p := alignDown(b.DateTime, Q5Slide)
		emitUpTo(p) // every later bid is at or after p: the windows ending by p are complete
		if len(panes) == 0 || panes[len(panes)-1].start != p {
			if len(panes) == 0 {
				next = p - Q5Size + Q5Slide // the first window holding p
			}
			panes = append(panes, pane{start: p, counts: map[int64]int64{}})
		}
		panes[len(panes)-1].counts[b.Auction]++
	}
	emitUpTo(upTo)
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
	case "q8": // …,windowStart
		start, err := lastField(q, v)
		return start + Q8Size, err
	case "q11": // …,end
		return lastField(q, v)
	}
	return 0, fmt.Errorf("nexmark: %q is not a windowed query", q)
}

// lastField parses the last field of an output value of q, an integer.
func lastField(q string, v []byte) (int64, error) {
	i := bytes.LastIndexByte(v, ',')
	n, err := strconv.ParseInt(string(v[i+1:]), 10, 64)
	if i < 0 || err != nil {
		return 0, fmt.Errorf("nexmark: not a %s output: %q", q, v)
	}
	return n, nil
}
