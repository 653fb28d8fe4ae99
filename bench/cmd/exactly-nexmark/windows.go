package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/exactlyonce/exactly/bench/nexmark"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// The windows of the windowed queries and the out-of-orderness their
// watermarks allow, as bench/nexmark defines them (in ms).
const (
	q7Window   = nexmark.Q7Size * time.Millisecond
	q5Window   = nexmark.Q5Size * time.Millisecond
	q5Slide    = nexmark.Q5Slide * time.Millisecond
	q11Gap     = nexmark.Q11Gap * time.Millisecond
	outOfOrder = nexmark.MaxOutOfOrderness * time.Millisecond
)

// event is an input record parsed for the windowed queries: a bid, or a
// person or auction (isBid false), which the queries skip.
type event struct {
	nexmark.Bid
	isBid bool
}

// parseEvent is the windowed queries' Kafka deserializer: it parses bids
// once, in the source, where their event time is needed for watermarks.
func parseEvent(v []byte) (event, error) {
	b, ok, err := nexmark.ParseBid(v)
	return event{Bid: b, isBid: ok}, err
}

// eventTime is a bid's dateTime; persons and auctions do not move event time.
func eventTime(e event) time.Time {
	if !e.isBid {
		return time.Unix(0, 0)
	}
	return time.UnixMilli(e.DateTime)
}

// bidTime is a bid's dateTime.
func bidTime(b nexmark.Bid) time.Time { return time.UnixMilli(b.DateTime) }

// windowed builds q5, q7 or q11 on event time: watermarks trail each
// partition's newest bid by one second.
func windowed(j *stream.Job, c config, in kafka.SourceOptions) (stream.Stream[result], error) {
	src, err := kafka.NewSource(in, parseEvent)
	if err != nil {
		return stream.Stream[result]{}, err
	}
	events := stream.SourceWithEventTime(j, "events", src,
		stream.EventTime[kafka.Record[event]]{Timestamp: func(r kafka.Record[event]) time.Time { return eventTime(r.Value) }, MaxOutOfOrderness: outOfOrder},
		stream.Parallelism(c.parallelism))
	bids := stream.FlatMap(events, func(r kafka.Record[event], out []nexmark.Bid) []nexmark.Bid {
		if r.Value.isBid {
			out = append(out, r.Value.Bid)
		}
		return out
	})
	switch c.query {
	case "q7":
		return highestBids(bids, c.parallelism), nil
	case "q11":
		return userSessions(bids, c.parallelism), nil
	}
	return hotItems(bids, c.parallelism), nil
}

// userSessions is q11: per bidder, the number of bids of each session of
// event time (bids less than nexmark.Q11Gap apart). A session window
// starts at its first bid and ends Q11Gap after its last.
func userSessions(bids stream.Stream[nexmark.Bid], parallelism int) stream.Stream[result] {
	byBidder := stream.KeyBy(bids, func(b nexmark.Bid) int64 { return b.Bidder }, state.Int64Codec{})
	return stream.WindowAggregate(byBidder, "sessions", stream.Session(q11Gap), bidTime,
		stream.Aggregate[int64, nexmark.Bid, int64, result]{
			Add:   func(n int64, _ nexmark.Bid) int64 { return n + 1 },
			Merge: func(a, b int64) int64 { return a + b },
			Result: func(bidder int64, w stream.Window, n int64) result {
				return result{value: nexmark.AppendQ11(make([]byte, 0, outCap), bidder, n, w.Start.UnixMilli(), w.End.UnixMilli()), time: w.End}
			},
			Codec: state.Int64Codec{},
		}, stream.Parallelism(parallelism))
}

// highestBids is q7: per tumbling window, the bids with the highest price.
// Windows are keyed by their start, so each key holds one window.
func highestBids(bids stream.Stream[nexmark.Bid], parallelism int) stream.Stream[result] {
	byWindow := stream.KeyBy(bids, func(b nexmark.Bid) int64 { return b.DateTime - b.DateTime%nexmark.Q7Size }, state.Int64Codec{})
	best := stream.WindowAggregate(byWindow, "highest-bids", stream.Tumbling(q7Window), bidTime,
		stream.Aggregate[int64, nexmark.Bid, []nexmark.Bid, []result]{
			Add: func(acc []nexmark.Bid, b nexmark.Bid) []nexmark.Bid {
				switch {
				case len(acc) == 0 || b.Price > acc[0].Price:
					return []nexmark.Bid{b}
				case b.Price == acc[0].Price:
					return append(slices.Clip(acc), b) // a new array: acc is checkpointed state
				}
				return acc
			},
			Result: func(_ int64, w stream.Window, acc []nexmark.Bid) []result {
				out := make([]result, len(acc))
				for i, b := range acc {
					out[i] = result{value: nexmark.AppendQ7(make([]byte, 0, outCap), w.Start.UnixMilli(), b), time: w.End}
				}
				return out
			},
			Codec: bidsCodec{},
		}, stream.Parallelism(parallelism))
	return flatten(best)
}

// auctionCount is the number of bids on an auction in one q5 window.
type auctionCount struct {
	start, end int64 // the window, Unix ms
	auction    int64
	count      int64
}

// hotItems is q5: per sliding window, the auctions with the most bids.
// Counts per auction and window come first; then, keyed by window, the
// greatest count is kept until the watermark passes the window's end.
func hotItems(bids stream.Stream[nexmark.Bid], parallelism int) stream.Stream[result] {
	byAuction := stream.KeyBy(bids, func(b nexmark.Bid) int64 { return b.Auction }, state.Int64Codec{})
	counts := stream.WindowAggregate(byAuction, "bids-per-window", stream.Sliding(q5Window, q5Slide), bidTime,
		stream.Aggregate[int64, nexmark.Bid, int64, auctionCount]{
			Add: func(n int64, _ nexmark.Bid) int64 { return n + 1 },
			Result: func(auction int64, w stream.Window, n int64) auctionCount {
				return auctionCount{start: w.Start.UnixMilli(), end: w.End.UnixMilli(), auction: auction, count: n}
			},
			Codec: state.Int64Codec{},
		}, stream.Parallelism(parallelism))
	byWindow := stream.KeyBy(counts, func(a auctionCount) int64 { return a.start }, state.Int64Codec{})
	hottest := stream.Process(byWindow, "hottest-per-window", func(ctx *stream.Context[int64]) (stream.ProcessFunc[int64, auctionCount, []result], error) {
		best, err := state.NewValueState(ctx.State(), "best", countsCodec{})
		if err != nil {
			return stream.ProcessFunc[int64, auctionCount, []result]{}, err
		}
		return stream.ProcessFunc[int64, auctionCount, []result]{
			Process: func(ctx *stream.Context[int64], a auctionCount, _ *stream.Output[[]result]) error {
				cur, ok := best.Value()
				if !ok {
					// The window's counts arrive as the watermark passes its
					// end, so this timer fires with that same watermark.
					ctx.RegisterEventTimer(time.UnixMilli(a.end).Add(-time.Nanosecond))
				}
				switch {
				case !ok || a.count > cur[0].count:
					best.Update([]auctionCount{a})
				case a.count == cur[0].count:
					best.Update(append(slices.Clip(cur), a)) // a new array: cur is checkpointed state
				}
				return nil
			},
			OnEventTimer: func(ctx *stream.Context[int64], _ time.Time, out *stream.Output[[]result]) error {
				cur, _ := best.Value()
				best.Clear()
				rs := make([]result, len(cur))
				for i, a := range cur {
					rs[i] = result{value: nexmark.AppendQ5(make([]byte, 0, outCap), a.start, a.auction, a.count), time: time.UnixMilli(a.end)}
				}
				out.Emit(rs)
				return nil
			},
		}, nil
	}, stream.Parallelism(parallelism))
	return flatten(hottest)
}

// flatten turns a stream of result lists into a stream of results.
func flatten(s stream.Stream[[]result]) stream.Stream[result] {
	return stream.FlatMap(s, func(rs []result, out []result) []result { return append(out, rs...) })
}

// errMalformedState reports a checkpointed accumulator that does not decode.
var errMalformedState = errors.New("exactly-nexmark: malformed checkpointed accumulator")

// appendInt64s encodes n records of int64 fields as varints: n, then every
// field of every record.
func appendInt64s(dst []byte, n int, fields func(i int) []int64) []byte {
	dst = binary.AppendUvarint(dst, uint64(n))
	for i := range n {
		for _, v := range fields(i) {
			dst = binary.AppendVarint(dst, v)
		}
	}
	return dst
}

// decodeInt64s decodes what appendInt64s wrote, width fields per record,
// calling set for each record.
func decodeInt64s(src []byte, width int, set func(fields []int64)) error {
	n, k := binary.Uvarint(src)
	if k <= 0 || n > uint64(len(src)) {
		return errMalformedState
	}
	src = src[k:]
	fields := make([]int64, width)
	for range n {
		for f := range fields {
			v, k := binary.Varint(src)
			if k <= 0 {
				return errMalformedState
			}
			fields[f], src = v, src[k:]
		}
		set(fields)
	}
	if len(src) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", errMalformedState, len(src))
	}
	return nil
}

// bidsCodec encodes q7's accumulator.
type bidsCodec struct{}

func (bidsCodec) Append(dst []byte, bs []nexmark.Bid) []byte {
	return appendInt64s(dst, len(bs), func(i int) []int64 {
		return []int64{bs[i].Auction, bs[i].Bidder, bs[i].Price, bs[i].DateTime}
	})
}

func (bidsCodec) Decode(src []byte) ([]nexmark.Bid, error) {
	var bs []nexmark.Bid
	err := decodeInt64s(src, 4, func(f []int64) {
		bs = append(bs, nexmark.Bid{Auction: f[0], Bidder: f[1], Price: f[2], DateTime: f[3]})
	})
	return bs, err
}

// countsCodec encodes q5's per-window state.
type countsCodec struct{}

func (countsCodec) Append(dst []byte, as []auctionCount) []byte {
	return appendInt64s(dst, len(as), func(i int) []int64 {
		return []int64{as[i].start, as[i].end, as[i].auction, as[i].count}
	})
}

func (countsCodec) Decode(src []byte) ([]auctionCount, error) {
	var as []auctionCount
	err := decodeInt64s(src, 4, func(f []int64) { as = append(as, auctionCount{start: f[0], end: f[1], auction: f[2], count: f[3]}) })
	return as, err
}
