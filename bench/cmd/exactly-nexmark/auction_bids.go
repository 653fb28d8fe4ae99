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

// q9 and q20 join each bid with its auction: the auctions and the bids
// keyed by auction id meet in a CoProcess, which keeps the auction in
// keyed state and, for a bid that comes before its auction (they are read
// from different partitions), keeps the bid until the auction comes.

// timedAuction is an auction of the input with its record's timestamp.
type timedAuction struct {
	nexmark.Auction
	time time.Time
	err  error
}

// auctionBids builds q4, q6, q9 or q20.
func auctionBids(j *stream.Job, c config, in kafka.SourceOptions) (stream.Stream[result], error) {
	src, err := kafka.NewSource(in, kafka.Bytes())
	if err != nil {
		return stream.Stream[result]{}, err
	}
	events := stream.Source(j, "events", src, stream.Parallelism(c.parallelism))
	auctions := stream.FlatMap(events, func(r kafka.Record[[]byte], out []timedAuction) []timedAuction {
		k, _, a, err := nexmark.ParsePersonOrAuction(r.Value)
		if err != nil || k == nexmark.AuctionKind {
			out = append(out, timedAuction{Auction: a, time: r.Timestamp, err: err})
		}
		return out
	})
	bids := stream.FlatMap(events, parseDetailedBids)
	byID := stream.KeyBy(auctions, func(a timedAuction) int64 { return a.ID }, state.Int64Codec{})
	byAuction := stream.KeyBy(bids, func(b detailedBid) int64 { return b.Auction }, state.Int64Codec{})
	switch c.query {
	case "q9":
		return stream.CoProcess(byID, byAuction, "winning-bids", winningBids, stream.Parallelism(c.parallelism)), nil
	case "q4":
		finals := stream.CoProcess(byID, byAuction, "final-prices", finalPrices, stream.Parallelism(c.parallelism))
		byCategory := stream.KeyBy(finals, func(f finalPrice) int64 { return f.auction.Category }, state.Int64Codec{})
		return stream.Process(byCategory, "average-prices", averagePrices, stream.Parallelism(c.parallelism)), nil
	case "q6":
		finals := stream.CoProcess(byID, byAuction, "final-prices", finalPrices, stream.Parallelism(c.parallelism))
		bySeller := stream.KeyBy(finals, func(f finalPrice) int64 { return f.auction.Seller }, state.Int64Codec{})
		return stream.Process(bySeller, "seller-averages", sellerAverages, stream.Parallelism(c.parallelism)), nil
	}
	return stream.CoProcess(byID, byAuction, "expanded-bids", expandedBids, stream.Parallelism(c.parallelism)), nil
}

// auctionWait is the keyed state q4, q9 and q20 share: the auction once it
// came, and the bids that came before it, kept until it comes.
type auctionWait struct {
	auction *state.ValueState[int64, nexmark.Auction]
	pending *state.ListState[int64, nexmark.BidDetail]
}

// newAuctionWait declares the state of an auctionWait.
func newAuctionWait(ctx *stream.Context[int64]) (auctionWait, error) {
	auction, err := state.NewValueState(ctx.State(), "auction", auctionCodec{})
	if err != nil {
		return auctionWait{}, err
	}
	pending, err := state.NewListState(ctx.State(), "pending", bidCodec{})
	return auctionWait{auction: auction, pending: pending}, err
}

// arrive keeps auction a, its fields copied, and returns it with the bids
// that waited for it, which it forgets.
func (w auctionWait) arrive(a nexmark.Auction) (nexmark.Auction, []nexmark.BidDetail) {
	a.Fields = slices.Clone(a.Fields)
	w.auction.Update(a)
	waited := slices.Collect(w.pending.All())
	w.pending.Clear()
	return a, waited
}

// bid returns the auction of bid b when it came; else it keeps b
// (compacted) until it comes.
func (w auctionWait) bid(b nexmark.BidDetail) (nexmark.Auction, bool) {
	a, ok := w.auction.Value()
	if !ok {
		w.pending.Add(compact(b))
	}
	return a, ok
}

// expandedBids is q20: every bid on an auction of nexmark.Q20Category,
// with the auction's fields. Of an auction of another category only the
// category is kept.
func expandedBids(ctx *stream.Context[int64]) (stream.CoProcessFunc[int64, timedAuction, detailedBid, result], error) {
	w, err := newAuctionWait(ctx)
	if err != nil {
		return stream.CoProcessFunc[int64, timedAuction, detailedBid, result]{}, err
	}
	emit := func(a nexmark.Auction, b nexmark.BidDetail, at time.Time, out *stream.Output[result]) {
		if a.Category == nexmark.Q20Category {
			out.Emit(result{value: nexmark.AppendQ20(make([]byte, 0, 256), b, a), time: at})
		}
	}
	return stream.CoProcessFunc[int64, timedAuction, detailedBid, result]{
		Process1: func(ctx *stream.Context[int64], a timedAuction, out *stream.Output[result]) error {
			if a.err != nil {
				return a.err
			}
			kept := a.Auction
			if kept.Category != nexmark.Q20Category {
				kept.Fields = nil
			}
			kept, waited := w.arrive(kept)
			for _, b := range waited {
				emit(kept, b, a.time, out)
			}
			return nil
		},
		Process2: func(ctx *stream.Context[int64], b detailedBid, out *stream.Output[result]) error {
			if b.err != nil {
				return b.err
			}
			if a, ok := w.bid(b.BidDetail); ok {
				emit(a, b.BidDetail, b.time, out)
			}
			return nil
		},
	}, nil
}

// winningBids is q9: per auction, its highest bid in its lifetime
// (nexmark.HigherBid, nexmark.InAuction), emitted with the auction's
// fields, keyed by its id, whenever it changes.
func winningBids(ctx *stream.Context[int64]) (stream.CoProcessFunc[int64, timedAuction, detailedBid, result], error) {
	w, err := newAuctionWait(ctx)
	if err != nil {
		return stream.CoProcessFunc[int64, timedAuction, detailedBid, result]{}, err
	}
	best, err := state.NewValueState(ctx.State(), "best", bidCodec{})
	if err != nil {
		return stream.CoProcessFunc[int64, timedAuction, detailedBid, result]{}, err
	}
	// bid counts b, true when it is the auction's new winner.
	bid := func(a nexmark.Auction, b nexmark.BidDetail) bool {
		if !nexmark.InAuction(b.Bid, a) {
			return false
		}
		if old, ok := best.Value(); ok && !nexmark.HigherBid(b, old) {
			return false
		}
		b.Channel = nil // q9 orders by the url, and outputs neither
		best.Update(compact(b))
		return true
	}
	emit := func(ctx *stream.Context[int64], a nexmark.Auction, at time.Time, out *stream.Output[result]) {
		b, _ := best.Value()
		out.Emit(result{key: strconv.AppendInt(nil, ctx.Key(), 10), value: nexmark.AppendQ9(make([]byte, 0, 256), a, b.Bid), time: at})
	}
	return stream.CoProcessFunc[int64, timedAuction, detailedBid, result]{
		Process1: func(ctx *stream.Context[int64], a timedAuction, out *stream.Output[result]) error {
			if a.err != nil {
				return a.err
			}
			kept, waited := w.arrive(a.Auction)
			won := false
			for _, b := range waited {
				won = bid(kept, b) || won
			}
			if won {
				emit(ctx, kept, a.time, out)
			}
			return nil
		},
		Process2: func(ctx *stream.Context[int64], b detailedBid, out *stream.Output[result]) error {
			if b.err != nil {
				return b.err
			}
			if a, ok := w.bid(b.BidDetail); ok && bid(a, b.BidDetail) {
				emit(ctx, a, b.time, out)
			}
			return nil
		},
	}, nil
}

// finalPrice is a change of an auction's final price (q4, q6): from old
// (0: none yet) to new; auction holds the auction's id, seller, category
// and expires.
type finalPrice struct {
	auction  nexmark.Auction
	old, new int64
	time     time.Time
}

// finalPrices is the first step of q4 and q6: per auction, the highest
// price of its bids in its lifetime, each change sent on.
func finalPrices(ctx *stream.Context[int64]) (stream.CoProcessFunc[int64, timedAuction, detailedBid, finalPrice], error) {
	w, err := newAuctionWait(ctx)
	if err != nil {
		return stream.CoProcessFunc[int64, timedAuction, detailedBid, finalPrice]{}, err
	}
	highest, err := state.NewValueState(ctx.State(), "highest", state.Int64Codec{})
	if err != nil {
		return stream.CoProcessFunc[int64, timedAuction, detailedBid, finalPrice]{}, err
	}
	bid := func(a nexmark.Auction, b nexmark.Bid, at time.Time, out *stream.Output[finalPrice]) {
		if old, _ := highest.Value(); nexmark.InAuction(b, a) && b.Price > old {
			highest.Update(b.Price)
			out.Emit(finalPrice{auction: a, old: old, new: b.Price, time: at})
		}
	}
	return stream.CoProcessFunc[int64, timedAuction, detailedBid, finalPrice]{
		Process1: func(ctx *stream.Context[int64], a timedAuction, out *stream.Output[finalPrice]) error {
			if a.err != nil {
				return a.err
			}
			kept := a.Auction
			kept.Fields = nil
			kept, waited := w.arrive(kept)
			for _, b := range waited {
				bid(kept, b.Bid, a.time, out)
			}
			return nil
		},
		Process2: func(ctx *stream.Context[int64], b detailedBid, out *stream.Output[finalPrice]) error {
			if b.err != nil {
				return b.err
			}
			if a, ok := w.bid(nexmark.BidDetail{Bid: b.Bid}); ok {
				bid(a, b.Bid, b.time, out)
			}
			return nil
		},
	}, nil
}

// averagePrices is q4's second step: per category, the sum and the number
// of its auctions' final prices, the row emitted at every change.
func averagePrices(ctx *stream.Context[int64]) (stream.ProcessFunc[int64, finalPrice, result], error) {
	sums, err := state.NewValueState(ctx.State(), "sums", priceSumCodec{})
	if err != nil {
		return stream.ProcessFunc[int64, finalPrice, result]{}, err
	}
	return stream.ProcessFunc[int64, finalPrice, result]{
		Process: func(ctx *stream.Context[int64], f finalPrice, out *stream.Output[result]) error {
			s, _ := sums.Value()
			if f.old == 0 {
				s.n++
			}
			s.sum += f.new - f.old
			sums.Update(s)
			out.Emit(result{key: strconv.AppendInt(nil, ctx.Key(), 10), value: nexmark.AppendQ4(make([]byte, 0, outCap), ctx.Key(), s.sum, s.n), time: f.time})
			return nil
		},
	}, nil
}

// sellerAverages is q6's second step: per seller, its latest auctions
// with their final prices, the row emitted at every change.
func sellerAverages(ctx *stream.Context[int64]) (stream.ProcessFunc[int64, finalPrice, result], error) {
	latest, err := state.NewValueState(ctx.State(), "latest", latestAuctionsCodec{})
	if err != nil {
		return stream.ProcessFunc[int64, finalPrice, result]{}, err
	}
	return stream.ProcessFunc[int64, finalPrice, result]{
		Process: func(ctx *stream.Context[int64], f finalPrice, out *stream.Output[result]) error {
			l, _ := latest.Value()
			l = l.Update(nexmark.SellerAuction{ID: f.auction.ID, Expires: f.auction.Expires, Price: f.new}, f.old == 0)
			latest.Update(l)
			out.Emit(result{key: strconv.AppendInt(nil, ctx.Key(), 10), value: nexmark.AppendQ6(make([]byte, 0, outCap), ctx.Key(), l), time: f.time})
			return nil
		},
	}, nil
}

// latestAuctionsCodec encodes q6's state of a seller as varints: the
// number of its auctions, then id, expires and price of each latest one.
type latestAuctionsCodec struct{}

func (latestAuctionsCodec) Append(dst []byte, l nexmark.LatestAuctions) []byte {
	dst = binary.AppendVarint(dst, l.Auctions)
	for _, a := range l.Latest {
		dst = binary.AppendVarint(binary.AppendVarint(binary.AppendVarint(dst, a.ID), a.Expires), a.Price)
	}
	return dst
}

func (latestAuctionsCodec) Decode(src []byte) (nexmark.LatestAuctions, error) {
	var l nexmark.LatestAuctions
	rest, err := varints(src, &l.Auctions)
	for err == nil && len(rest) > 0 {
		var a nexmark.SellerAuction
		if rest, err = varints(rest, &a.ID, &a.Expires, &a.Price); err == nil {
			l.Latest = append(l.Latest, a)
		}
	}
	if err == nil && len(l.Latest) > nexmark.Q6Auctions {
		err = errMalformedState
	}
	return l, err
}

// priceSum is q4's state of a category.
type priceSum struct{ sum, n int64 }

// priceSumCodec encodes a priceSum as two varints.
type priceSumCodec struct{}

func (priceSumCodec) Append(dst []byte, s priceSum) []byte {
	return binary.AppendVarint(binary.AppendVarint(dst, s.sum), s.n)
}

func (priceSumCodec) Decode(src []byte) (priceSum, error) {
	var s priceSum
	err := allVarints(src, &s.sum, &s.n)
	return s, err
}

// auctionCodec encodes a kept auction: id, seller, category, dateTime and
// expires as varints, then its fields.
type auctionCodec struct{}

func (auctionCodec) Append(dst []byte, a nexmark.Auction) []byte {
	for _, n := range []int64{a.ID, a.Seller, a.Category, a.DateTime, a.Expires} {
		dst = binary.AppendVarint(dst, n)
	}
	return append(dst, a.Fields...)
}

func (auctionCodec) Decode(src []byte) (nexmark.Auction, error) {
	var a nexmark.Auction
	rest, err := varints(src, &a.ID, &a.Seller, &a.Category, &a.DateTime, &a.Expires)
	if err != nil {
		return a, err
	}
	if len(rest) > 0 {
		a.Fields = slices.Clone(rest)
	}
	return a, nil
}
