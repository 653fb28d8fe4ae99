// Package nexmark generates the Nexmark event stream (persons, auctions and
// bids of an online auction site) and defines the benchmark's queries on it,
// so that exactly, Apache Flink and Kafka Streams compute the same thing from
// the same bytes.
//
// # Events
//
// Event i of a stream is determined by (seed, i) alone. Of every 50
// consecutive events, 1 is a person, 3 are auctions and 46 are bids, the
// proportions of the Nexmark generator (Beam's and Flink's). As there, bids
// go to recent auctions, half of them to a few "hot" auctions and bidders,
// and prices are log-uniform between $1 and $10,000 (in cents).
//
// An event is one line of comma-separated fields whose first field is its
// kind; no field contains a comma:
//
//	P,id,name,email,creditCard,city,state,dateTime,extra
//	A,id,itemName,description,initialBid,reserve,dateTime,expires,seller,category,extra
//	B,auction,bidder,price,channel,url,dateTime,extra
//
// A bid's url is https://www.nexmark.com/<dir1>/<dir2>/<dir3>/item.htm?query=1&channel_id=<n>,
// each dir five letters.
//
// dateTime and expires are Unix milliseconds.
//
// # Queries
//
// The Java peers under bench/peers implement the same queries byte for
// byte (bench/peers/common holds their shared code). q0, q1, q2 and count map
// each input value to zero or one output value:
//
//   - q0 (pass-through): every event, unchanged.
//   - q1 (currency conversion): each bid as "auction,bidder,priceEuro,dateTime",
//     priceEuro = price*908/1000 (integer division).
//   - q2 (selection): each bid whose auction is a multiple of 123, as
//     "auction,price".
//   - count (keyed running count): each bid as "auction,n", n the number of
//     bids on that auction so far, this one included.
//
// q10, q13, q14, q21 and q22, of Flink's Nexmark suite, map each bid to
// zero or one output too (see BidDetail), q3 joins persons with their
// auctions (see Q3Category), at most one output per auction, and q20 bids
// with their auctions (see Q20Category), at most one output per bid.
// AppendStateless and ReferenceDigest are the reference of all these.
//
// q4, q6, q9 and q15–q19 compute tables that their output updates (see
// Updating); q12 windows on processing time, checked by its sums per
// bidder (see Summing).
//
// q5 and q7 are windowed on event time. Only bids count; a bid's event time
// is its dateTime. Windows are aligned to the Unix epoch: a window of size s
// is [start, start+s) in Unix ms, start a multiple of its period. Watermarks
// allow MaxOutOfOrderness (1 s) of disorder: on Flink a bounded
// out-of-orderness watermark strategy on the Kafka source, per partition; on
// Kafka Streams the bid's dateTime as the record timestamp and a grace
// period of 1 s. Only final results are output, once per window, each as a
// Kafka record whose timestamp is the window's end.
//
//   - q7 (highest bid): tumbling windows of Q7Size (10 s). For each window,
//     every bid whose price is the highest in the window, as
//     "windowStart,auction,bidder,price,dateTime" (see AppendQ7).
//   - q5 (hot items): sliding windows of Q5Size (10 s) every Q5Slide (2 s).
//     For each window, the number of bids per auction, and every auction
//     whose count is the highest in the window, as "windowStart,auction,count"
//     (see AppendQ5).
//
// A system's watermark never reaches the end of an unbounded input, so
// whether its last windows fire depends on the system. A run over events
// [0, n) checks only the windows ending at or before Cutoff(n), CheckMargin
// (3 s) before the dateTime of the last event; WindowStart tells an output's
// window. HighestBids and HotItems are the reference implementations,
// CheckedOutputs makes the checked outputs with them.
package nexmark

import (
	"bytes"
	"errors"
	"fmt"
	"iter"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/exactlyonce/exactly/connectors/generator"
)

// Proportions of the event kinds in every group of ProportionDenominator events.
const (
	PersonProportion      = 1
	AuctionProportion     = 3
	BidProportion         = 46
	ProportionDenominator = PersonProportion + AuctionProportion + BidProportion
)

// Generator constants, from the Nexmark generator's defaults.
const (
	firstPersonID   = 1000
	firstAuctionID  = 1000
	hotRatio        = 2   // 1 in hotRatio bids go to a hot auction, and are by a hot bidder
	hotAuctions     = 100 // hot auctions are multiples of this (relative to firstAuctionID)
	hotBidders      = 100
	inFlightAuction = 100 // a bid's auction is one of the last inFlightAuction ones
	activePeople    = 1000
	channels        = 10_000
	// BaseTime is the dateTime of event 0 (2026-01-01T00:00:00Z), in Unix ms.
	BaseTime = 1_767_225_600_000
	// EventSpacingMicros is the event-time distance between consecutive
	// events: 10,000 events per second of event time.
	EventSpacingMicros = 100
)

// EuroRate is the q1 conversion: priceEuro = price*EuroRateNum/EuroRateDen.
const (
	EuroRateNum = 908
	EuroRateDen = 1000
	// Q2Modulus selects the q2 bids: auction % Q2Modulus == 0.
	Q2Modulus = 123
)

var (
	firstNames = []string{"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter"}
	lastNames  = []string{"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris"}
	usStates   = []string{"AZ", "CA", "ID", "OR", "WA", "WY"}
	usCities   = []string{"Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent", "Cheyenne"}
	hotChannel = []string{"Google", "Facebook", "Baidu", "Apple"}
)

// Kind is an event's kind: 'P', 'A' or 'B'.
type Kind byte

// The event kinds.
const (
	PersonKind  Kind = 'P'
	AuctionKind Kind = 'A'
	BidKind     Kind = 'B'
)

// KindOf returns the kind of event i.
func KindOf(i uint64) Kind {
	switch r := i % ProportionDenominator; {
	case r < PersonProportion:
		return PersonKind
	case r < PersonProportion+AuctionProportion:
		return AuctionKind
	default:
		return BidKind
	}
}

// lastAuctionID is the id of the newest auction at or before event i.
func lastAuctionID(i uint64) int64 {
	epoch, off := i/ProportionDenominator, i%ProportionDenominator
	// Auctions of this epoch up to event i, which is included.
	k := min(max(int64(off)+1-PersonProportion, 0), AuctionProportion)
	return firstAuctionID + int64(epoch)*AuctionProportion + k - 1
}

// lastPersonID is the id of the newest person at or before event i.
func lastPersonID(i uint64) int64 {
	return firstPersonID + int64(i/ProportionDenominator)
}

// Append appends event i of the stream seeded by seed to dst.
func Append(dst []byte, seed, i uint64) []byte {
	r := generator.Rand(seed, i)
	dateTime := DateTime(i)
	switch KindOf(i) {
	case PersonKind:
		id := lastPersonID(i)
		dst = append(dst, "P,"...)
		dst = strconv.AppendInt(dst, id, 10)
		dst = append(dst, ',')
		dst = append(dst, firstNames[r.IntN(len(firstNames))]...)
		dst = append(dst, ' ')
		dst = append(dst, lastNames[r.IntN(len(lastNames))]...)
		dst = append(dst, ',')
		dst = appendLetters(dst, r.Uint64(), 7)
		dst = append(dst, "@example.com,"...)
		for k := range 4 {
			if k > 0 {
				dst = append(dst, ' ')
			}
			dst = strconv.AppendInt(dst, 1000+r.Int64N(9000), 10)
		}
		dst = append(dst, ',')
		dst = append(dst, usCities[r.IntN(len(usCities))]...)
		dst = append(dst, ',')
		dst = append(dst, usStates[r.IntN(len(usStates))]...)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, dateTime, 10)
		dst = append(dst, ',')
		return appendExtra(dst, r.Uint64(), 80)
	case AuctionKind:
		id := lastAuctionID(i)
		initial := price(r.Float64())
		dst = append(dst, "A,"...)
		dst = strconv.AppendInt(dst, id, 10)
		dst = append(dst, ",item-"...)
		dst = appendLetters(dst, r.Uint64(), 8)
		dst = append(dst, ",description of item "...)
		dst = appendLetters(dst, r.Uint64(), 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, initial, 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, initial+price(r.Float64()), 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, dateTime, 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, dateTime+10_000+r.Int64N(60_000), 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, recentPerson(r.Int64N, i), 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, 10+r.Int64N(5), 10)
		dst = append(dst, ',')
		return appendExtra(dst, r.Uint64(), 300)
	default:
		b := drawBid(r, i)
		dst = append(dst, "B,"...)
		dst = strconv.AppendInt(dst, b.Auction, 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, b.Bidder, 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, b.Price, 10)
		dst = append(dst, ',')
		ch := r.IntN(channels)
		if ch < len(hotChannel) {
			dst = append(dst, hotChannel[ch]...)
		} else {
			dst = append(dst, "channel-"...)
			dst = strconv.AppendInt(dst, int64(ch), 10)
		}
		dst = append(dst, ",https://www.nexmark.com/"...)
		dst = appendLetters(dst, r.Uint64(), 5)
		dirs := r.Uint64() // drawn after the fields the other queries read
		dst = append(dst, '/')
		dst = appendLetters(dst, dirs, 5)
		dst = append(dst, '/')
		dst = appendLetters(dst, dirs>>32, 5)
		dst = append(dst, "/item.htm?query=1&channel_id="...)
		dst = strconv.AppendInt(dst, int64(ch), 10)
		dst = append(dst, ',')
		dst = strconv.AppendInt(dst, dateTime, 10)
		dst = append(dst, ',')
		return dst
	}
}

// drawBid draws the auction, bidder and price of bid i from r, the first
// draws of Append for a bid, and sets its dateTime.
func drawBid(r *rand.Rand, i uint64) Bid {
	b := Bid{DateTime: DateTime(i)}
	last := lastAuctionID(i)
	if r.IntN(hotRatio) > 0 {
		b.Auction = (last-firstAuctionID)/hotAuctions*hotAuctions + firstAuctionID
	} else {
		b.Auction = max(firstAuctionID, last-r.Int64N(inFlightAuction))
	}
	if r.IntN(hotRatio) > 0 {
		b.Bidder = (lastPersonID(i)-firstPersonID)/hotBidders*hotBidders + firstPersonID + 1
	} else {
		b.Bidder = recentPerson(r.Int64N, i)
	}
	b.Price = price(r.Float64())
	return b
}

// DateTime returns the dateTime of event i, in Unix ms.
func DateTime(i uint64) int64 { return int64(BaseTime) + int64(i)*EventSpacingMicros/1000 }

// Bids yields the bids among events [from, to) of the stream seeded by seed,
// in event order, which is non-decreasing DateTime order: the bids Append
// writes, without formatting them.
func Bids(seed, from, to uint64) iter.Seq[Bid] {
	return func(yield func(Bid) bool) {
		for i := from; i < to; i++ {
			if KindOf(i) == BidKind && !yield(drawBid(generator.Rand(seed, i), i)) {
				return
			}
		}
	}
}

// recentPerson picks one of the last activePeople persons at or before event i.
func recentPerson(int64n func(int64) int64, i uint64) int64 {
	last := lastPersonID(i)
	return max(firstPersonID, last-int64n(activePeople))
}

// price is a log-uniform price between 100 and 1,000,000 cents.
func price(u float64) int64 {
	p := 100.0
	for range int(u * 4) { // 10^(4u) without math.Pow's cost per event
		p *= 10
	}
	frac := u*4 - float64(int(u*4))
	return int64(p * (1 + 9*frac))
}

// appendLetters appends n lowercase letters derived from bits.
func appendLetters(dst []byte, bits uint64, n int) []byte {
	for range n {
		dst = append(dst, byte('a'+bits%26))
		bits /= 26
	}
	return dst
}

// appendExtra appends about n letters of padding (between n/2 and 3n/2).
func appendExtra(dst []byte, bits uint64, n int) []byte {
	k := n/2 + int(bits%uint64(n+1))
	for j := range k {
		dst = append(dst, byte('a'+(bits>>(j%58))%26))
	}
	return dst
}

// Queries lists the query names in the order the benchmark runs them.
var Queries = []string{"q0", "q1", "q2", "count", "q3", "q4", "q5", "q6", "q7", "q8", "q9", "q10", "q11", "q12", "q13", "q14", "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22"}

// PerEvent reports whether query q maps each event to at most one output,
// so that ReferenceDigest gives its outputs.
func PerEvent(q string) bool {
	switch q {
	case "q0", "q1", "q2", "count", "q3", "q10", "q13", "q14", "q20", "q21", "q22":
		return true
	}
	return false
}

// Stateful reports whether query q keeps state from one event to the
// next, so that a run of it SIGKILLed and restarted tests its recovery of
// that state: the windowed and the updating queries, count, q3 and q20.
func Stateful(q string) bool {
	return Windowed(q) || Updating(q) || q == "count" || q == "q3" || q == "q20"
}

// ErrMalformed is returned for a value that is not a well-formed event.
var ErrMalformed = errors.New("nexmark: malformed event")

// Bid is the part of a bid the queries read.
type Bid struct {
	Auction, Bidder, Price, DateTime int64
}

// ParseBid parses v; ok is false when v is a person or an auction.
func ParseBid(v []byte) (b Bid, ok bool, err error) {
	if len(v) < 2 || v[1] != ',' {
		return Bid{}, false, fmt.Errorf("%w: %q", ErrMalformed, v)
	}
	if Kind(v[0]) != BidKind {
		return Bid{}, false, nil
	}
	// Fields: auction,bidder,price,channel,url,dateTime,extra; the queries
	// read the integers below, nil where a field is skipped.
	into := [6]*int64{&b.Auction, &b.Bidder, &b.Price, nil, nil, &b.DateTime}
	rest := v[2:]
	for field, dst := range into {
		c := bytes.IndexByte(rest, ',')
		if c < 0 {
			return Bid{}, false, fmt.Errorf("%w: %q", ErrMalformed, v)
		}
		if dst != nil {
			n, good := parseInt(rest[:c])
			if !good {
				return Bid{}, false, fmt.Errorf("%w: field %d is not an integer: %q", ErrMalformed, field+1, v)
			}
			*dst = n
		}
		rest = rest[c+1:]
	}
	return b, true, nil
}

// parseInt parses a decimal integer of at most 18 digits, optionally
// negative, as the Java peers do; strconv would cost a string conversion
// per field.
func parseInt(d []byte) (int64, bool) {
	neg := len(d) > 0 && d[0] == '-'
	if neg {
		d = d[1:]
	}
	if len(d) == 0 || len(d) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}

// AppendQ1 appends the q1 output of bid b.
func AppendQ1(dst []byte, b Bid) []byte {
	return appendFields(dst, b.Auction, b.Bidder, b.Price*EuroRateNum/EuroRateDen, b.DateTime)
}

// Q2Selects reports whether q2 outputs bid b.
func Q2Selects(b Bid) bool { return b.Auction%Q2Modulus == 0 }

// AppendQ2 appends the q2 output of bid b.
func AppendQ2(dst []byte, b Bid) []byte { return appendFields(dst, b.Auction, b.Price) }

// AppendCount appends the count output: the auction and its running count.
func AppendCount(dst []byte, auction, n int64) []byte { return appendFields(dst, auction, n) }

// appendFields appends the decimal integers vs separated by commas: the
// format of every query's output.
func appendFields(dst []byte, vs ...int64) []byte {
	for i, v := range vs {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendInt(dst, v, 10)
	}
	return dst
}

// Expected returns how many output records query q makes of events
// [from, to) of the stream seeded by seed; for q5 and q7, the outputs of the
// windows ending at or before Cutoff(to), the checked ones; for the
// updating queries, the rows of the final table.
func Expected(q string, seed, from, to uint64) (uint64, error) {
	if !slices.Contains(Queries, q) {
		return 0, fmt.Errorf("nexmark: unknown query %q (want one of %v)", q, Queries)
	}
	if to <= from {
		return 0, nil
	}
	var n uint64
	switch q {
	case "q0":
		n = to - from
	case "q2":
		for b := range Bids(seed, from, to) {
			if Q2Selects(b) {
				n++
			}
		}
	case "q5", "q7", "q8", "q11":
		err := CheckedOutputs(q, seed, from, to, func([]byte) { n++ })
		return n, err
	case "q4", "q6", "q9", "q12", "q15", "q16", "q17", "q18", "q19":
		t, err := ReferenceTable(q, seed, from, to)
		return uint64(len(t)), err
	case "q3", "q10", "q13", "q14", "q20", "q21", "q22":
		d, err := ReferenceDigest(q, seed, from, to)
		return d.N, err
	default: // q1, count: one output per bid
		for i := from; i < to; i++ {
			if KindOf(i) == BidKind {
				n++
			}
		}
	}
	return n, nil
}
