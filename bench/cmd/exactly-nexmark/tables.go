package main

import (
	"encoding/binary"
	"slices"
	"strconv"
	"time"

	"github.com/exactlyonce/exactly/bench/nexmark"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// The updating queries (q15–q19, see bench/nexmark) keep a row per key in
// keyed state and emit the row, keyed, whenever it changes: the output
// topic is the table's changelog.

// detailedBid is a bid as the updating queries read it, with its input
// record's timestamp, or the parse error.
type detailedBid struct {
	nexmark.BidDetail
	time time.Time
	err  error
}

// parseDetailedBids keeps the bids of the input, parsed with their
// channel and url (subslices of the record's value, which the job owns).
func parseDetailedBids(r kafka.Record[[]byte], out []detailedBid) []detailedBid {
	b, ok, err := nexmark.ParseBidDetail(r.Value)
	if ok || err != nil {
		out = append(out, detailedBid{BidDetail: b, time: r.Timestamp, err: err})
	}
	return out
}

// tables builds q15–q19 on the bids of the input.
func tables(j *stream.Job, c config, in kafka.SourceOptions) (stream.Stream[result], error) {
	src, err := kafka.NewSource(in, kafka.Bytes())
	if err != nil {
		return stream.Stream[result]{}, err
	}
	bids := stream.FlatMap(stream.Source(j, "events", src, stream.Parallelism(c.parallelism)), parseDetailedBids)
	p := stream.Parallelism(c.parallelism)
	switch c.query {
	case "q15", "q16":
		key := func(b detailedBid) string { return nexmark.Day(b.DateTime) }
		if c.query == "q16" {
			key = func(b detailedBid) string { return string(b.Channel) + "," + nexmark.Day(b.DateTime) }
		}
		return stream.Process(stream.KeyBy(bids, key, state.StringCodec{}), "bid-stats", bidStats(c.query == "q16"), p), nil
	case "q17":
		key := func(b detailedBid) string { return strconv.FormatInt(b.Auction, 10) + "," + nexmark.Day(b.DateTime) }
		return stream.Process(stream.KeyBy(bids, key, state.StringCodec{}), "auction-stats", auctionStats, p), nil
	case "q18":
		key := func(b detailedBid) string {
			return strconv.FormatInt(b.Bidder, 10) + "," + strconv.FormatInt(b.Auction, 10)
		}
		return stream.Process(stream.KeyBy(bids, key, state.StringCodec{}), "last-bid", lastBid, p), nil
	default: // q19
		return stream.Process(stream.KeyBy(bids, func(b detailedBid) int64 { return b.Auction }, state.Int64Codec{}), "top-bids", topBids, p), nil
	}
}

// groupStats is the state of a q15 or q16 group: its counts and, for
// q16, the latest minute of its bids.
type groupStats struct {
	nexmark.BidStats
	minute string
}

// bidStats returns q15's (channel false) or q16's function: per group,
// the counts of bids, distinct bidders and distinct auctions by price
// rank, the price ranks each bidder and auction was seen at in map state.
func bidStats(channel bool) func(ctx *stream.Context[string]) (stream.ProcessFunc[string, detailedBid, result], error) {
	return func(ctx *stream.Context[string]) (stream.ProcessFunc[string, detailedBid, result], error) {
		stats, err := state.NewValueState(ctx.State(), "stats", groupStatsCodec{})
		if err != nil {
			return stream.ProcessFunc[string, detailedBid, result]{}, err
		}
		bidders, err := state.NewMapState(ctx.State(), "bidders", state.Int64Codec{}, ranksCodec{})
		if err != nil {
			return stream.ProcessFunc[string, detailedBid, result]{}, err
		}
		auctions, err := state.NewMapState(ctx.State(), "auctions", state.Int64Codec{}, ranksCodec{})
		if err != nil {
			return stream.ProcessFunc[string, detailedBid, result]{}, err
		}
		return stream.ProcessFunc[string, detailedBid, result]{
			Process: func(ctx *stream.Context[string], b detailedBid, out *stream.Output[result]) error {
				if b.err != nil {
					return b.err
				}
				s, _ := stats.Value()
				r := nexmark.PriceRank(b.Price)
				s.Bids[0]++
				s.Bids[r]++
				bidders.Compute(b.Bidder, func(seen nexmark.DistinctRanks, _ bool) nexmark.DistinctRanks { return seen.Count(r, &s.Bidders) })
				auctions.Compute(b.Auction, func(seen nexmark.DistinctRanks, _ bool) nexmark.DistinctRanks { return seen.Count(r, &s.Auctions) })
				row := append(make([]byte, 0, 96), ctx.Key()...)
				if channel {
					s.minute = max(s.minute, nexmark.Minute(b.DateTime))
					row = append(append(row, ','), s.minute...)
				}
				stats.Update(s)
				out.Emit(result{key: []byte(ctx.Key()), value: s.Append(row), time: b.time})
				return nil
			},
		}, nil
	}
}

// auctionStats is q17: per auction and day, the counts by price rank and
// the minimum, maximum, average and sum of the prices.
func auctionStats(ctx *stream.Context[string]) (stream.ProcessFunc[string, detailedBid, result], error) {
	stats, err := state.NewValueState(ctx.State(), "stats", auctionStatsCodec{})
	if err != nil {
		return stream.ProcessFunc[string, detailedBid, result]{}, err
	}
	return stream.ProcessFunc[string, detailedBid, result]{
		Process: func(ctx *stream.Context[string], b detailedBid, out *stream.Output[result]) error {
			if b.err != nil {
				return b.err
			}
			s, _ := stats.Value()
			s = s.Add(b.Price)
			stats.Update(s)
			day := ctx.Key()[len(ctx.Key())-len("2006-01-02"):]
			out.Emit(result{key: []byte(ctx.Key()), value: nexmark.AppendQ17(make([]byte, 0, outCap), b.Auction, day, s), time: b.time})
			return nil
		},
	}, nil
}

// lastBid is q18: per bidder and auction, the last bid (nexmark.LaterBid),
// emitted whenever it changes.
func lastBid(ctx *stream.Context[string]) (stream.ProcessFunc[string, detailedBid, result], error) {
	kept, err := state.NewValueState(ctx.State(), "last", bidCodec{})
	if err != nil {
		return stream.ProcessFunc[string, detailedBid, result]{}, err
	}
	return stream.ProcessFunc[string, detailedBid, result]{
		Process: func(ctx *stream.Context[string], b detailedBid, out *stream.Output[result]) error {
			if b.err != nil {
				return b.err
			}
			if old, ok := kept.Value(); ok && !nexmark.LaterBid(b.BidDetail, old) {
				return nil
			}
			kept.Update(compact(b.BidDetail))
			out.Emit(result{key: []byte(ctx.Key()), value: nexmark.AppendBidRow(make([]byte, 0, 128), b.BidDetail), time: b.time})
			return nil
		},
	}, nil
}

// topBids is q19: per auction its nexmark.Q19Rows highest bids
// (nexmark.HigherBid); a bid that enters them emits the rows of its rank
// and of every rank below, which moved down.
func topBids(ctx *stream.Context[int64]) (stream.ProcessFunc[int64, detailedBid, result], error) {
	kept, err := state.NewValueState(ctx.State(), "top", topCodec{})
	if err != nil {
		return stream.ProcessFunc[int64, detailedBid, result]{}, err
	}
	return stream.ProcessFunc[int64, detailedBid, result]{
		Process: func(ctx *stream.Context[int64], b detailedBid, out *stream.Output[result]) error {
			if b.err != nil {
				return b.err
			}
			top, _ := kept.Value()
			at := len(top)
			for at > 0 && nexmark.HigherBid(b.BidDetail, top[at-1]) {
				at--
			}
			if at == nexmark.Q19Rows {
				return nil
			}
			top = slices.Insert(slices.Clone(top), at, compact(b.BidDetail))
			top = top[:min(len(top), nexmark.Q19Rows)]
			kept.Update(top)
			for r := at; r < len(top); r++ {
				row := append(nexmark.AppendBidRow(make([]byte, 0, 128), top[r]), ',')
				out.Emit(result{key: []byte(nexmark.Q19Key(ctx.Key(), r+1)), value: strconv.AppendInt(row, int64(r+1), 10), time: b.time})
			}
			return nil
		},
	}, nil
}

// compact returns b with its channel and url copied into one allocation
// of their own: kept in state, they would otherwise hold the whole input
// record they are subslices of.
func compact(b nexmark.BidDetail) nexmark.BidDetail {
	buf := append(append(make([]byte, 0, len(b.Channel)+len(b.URL)), b.Channel...), b.URL...)
	b.Channel, b.URL = buf[:len(b.Channel):len(b.Channel)], buf[len(b.Channel):]
	return b
}

// varints decodes len(dst) varints from src into dst and returns the rest.
func varints(src []byte, dst ...*int64) ([]byte, error) {
	for _, d := range dst {
		v, n := binary.Varint(src)
		if n <= 0 {
			return nil, errMalformedState
		}
		*d, src = v, src[n:]
	}
	return src, nil
}

// allVarints decodes src, exactly len(dst) varints, into dst.
func allVarints(src []byte, dst ...*int64) error {
	rest, err := varints(src, dst...)
	if err == nil && len(rest) > 0 {
		err = errMalformedState
	}
	return err
}

// ranksCodec encodes a DistinctRanks as its byte.
type ranksCodec struct{}

func (ranksCodec) Append(dst []byte, r nexmark.DistinctRanks) []byte { return append(dst, byte(r)) }

func (ranksCodec) Decode(src []byte) (nexmark.DistinctRanks, error) {
	if len(src) != 1 || src[0]&^0b1110 != 0 {
		return 0, errMalformedState
	}
	return nexmark.DistinctRanks(src[0]), nil
}

// groupStatsCodec encodes a group's counts as 12 varints, then its minute.
type groupStatsCodec struct{}

func (groupStatsCodec) Append(dst []byte, s groupStats) []byte {
	for _, c := range [][4]int64{s.Bids, s.Bidders, s.Auctions} {
		for _, n := range c {
			dst = binary.AppendVarint(dst, n)
		}
	}
	return append(dst, s.minute...)
}

func (groupStatsCodec) Decode(src []byte) (groupStats, error) {
	var s groupStats
	var ptrs []*int64
	for _, c := range []*[4]int64{&s.Bids, &s.Bidders, &s.Auctions} {
		for i := range c {
			ptrs = append(ptrs, &c[i])
		}
	}
	rest, err := varints(src, ptrs...)
	if err != nil {
		return groupStats{}, err
	}
	s.minute = string(rest)
	return s, nil
}

// auctionStatsCodec encodes q17's state as 7 varints.
type auctionStatsCodec struct{}

func (auctionStatsCodec) Append(dst []byte, s nexmark.AuctionStats) []byte {
	for _, n := range append(s.Bids[:], s.Min, s.Max, s.Sum) {
		dst = binary.AppendVarint(dst, n)
	}
	return dst
}

func (auctionStatsCodec) Decode(src []byte) (nexmark.AuctionStats, error) {
	var s nexmark.AuctionStats
	err := allVarints(src, &s.Bids[0], &s.Bids[1], &s.Bids[2], &s.Bids[3], &s.Min, &s.Max, &s.Sum)
	return s, err
}

// bidCodec encodes a kept bid: auction, bidder, price, dateTime and the
// channel's length as varints, the channel, the url.
type bidCodec struct{}

func (bidCodec) Append(dst []byte, b nexmark.BidDetail) []byte {
	for _, n := range []int64{b.Auction, b.Bidder, b.Price, b.DateTime, int64(len(b.Channel)), int64(len(b.URL))} {
		dst = binary.AppendVarint(dst, n)
	}
	return append(append(dst, b.Channel...), b.URL...)
}

func (c bidCodec) Decode(src []byte) (nexmark.BidDetail, error) {
	b, rest, err := c.decode(src)
	if err == nil && len(rest) > 0 {
		err = errMalformedState
	}
	return b, err
}

// decode decodes one bid from the front of src and returns the rest.
func (bidCodec) decode(src []byte) (nexmark.BidDetail, []byte, error) {
	var b nexmark.BidDetail
	var channel, url int64
	rest, err := varints(src, &b.Auction, &b.Bidder, &b.Price, &b.DateTime, &channel, &url)
	if err != nil || channel < 0 || url < 0 || int64(len(rest)) < channel+url {
		return b, nil, errMalformedState
	}
	b.Channel, b.URL = slices.Clone(rest[:channel]), slices.Clone(rest[channel:channel+url])
	return b, rest[channel+url:], nil
}

// topCodec encodes q19's kept bids one after the other.
type topCodec struct{}

func (topCodec) Append(dst []byte, top []nexmark.BidDetail) []byte {
	for _, b := range top {
		dst = bidCodec{}.Append(dst, b)
	}
	return dst
}

func (topCodec) Decode(src []byte) ([]nexmark.BidDetail, error) {
	var top []nexmark.BidDetail
	for len(src) > 0 {
		b, rest, err := bidCodec{}.decode(src)
		if err != nil {
			return nil, err
		}
		top, src = append(top, b), rest
	}
	return top, nil
}
