package nexmark

import (
	"slices"
	"strconv"
	"strings"
)

// q3 (local item suggestion), of Flink's Nexmark suite, is a regular
// (unbounded) inner join of persons and auctions on the auction's seller:
// every auction of category Q3Category whose seller lives in Oregon, Idaho
// or California, as "name,city,state,auctionID" (the seller's name, city
// and state). Neither input is windowed: a system keeps the persons and
// the auctions it selects for as long as it runs, and outputs each pair
// once, when the later of the two arrives. In this generator a seller is
// always an earlier person, so every selected auction has its output.
const Q3Category = 10

// Q3SelectsPerson reports whether q3 keeps person p: one of its states.
func Q3SelectsPerson(p Person) bool {
	switch string(p.State) {
	case "OR", "ID", "CA":
		return true
	}
	return false
}

// Q3SelectsAuction reports whether q3 keeps auction a: its category.
func Q3SelectsAuction(a Auction) bool { return a.Category == Q3Category }

// AppendQ3 appends the q3 output of the auction auctionID sold by p.
func AppendQ3(dst []byte, p Person, auctionID int64) []byte {
	dst = append(append(dst, p.Name...), ',')
	dst = append(append(dst, p.City...), ',')
	dst = append(append(dst, p.State...), ',')
	return appendFields(dst, auctionID)
}

// localItems is the reference q3: it takes the events in order, so a
// selected auction's seller, always an earlier event, is known when the
// auction comes.
type localItems struct {
	sellers map[int64]Person // the selected persons, their fields copied
	out     []byte
}

// add takes event v and returns its output, if it has one; the output
// is valid until the next call.
func (l *localItems) add(v []byte) ([]byte, bool, error) {
	k, p, a, err := ParsePersonOrAuction(v)
	switch {
	case err != nil:
		return nil, false, err
	case k == PersonKind && Q3SelectsPerson(p):
		p.Name, p.City, p.State = slices.Clone(p.Name), slices.Clone(p.City), slices.Clone(p.State)
		l.sellers[p.ID] = p
	case k == AuctionKind && Q3SelectsAuction(a):
		if p, ok := l.sellers[a.Seller]; ok {
			l.out = AppendQ3(l.out[:0], p, a.ID)
			return l.out, true, nil
		}
	}
	return nil, false, nil
}

// q20 (expand bid with auction), of Flink's Nexmark suite, is a regular
// inner join of bids and auctions on the bid's auction: every bid on an
// auction of category Q20Category, as its fields
// "auction,bidder,price,channel,url,dateTime" (AppendBidRow) followed by
// the auction's "itemName,description,initialBid,reserve,dateTime,expires,seller,category".
// In this generator a bid's auction is always an earlier event.
const Q20Category = 10

// AppendQ20 appends the q20 output of bid b on auction a.
func AppendQ20(dst []byte, b BidDetail, a Auction) []byte {
	return append(append(AppendBidRow(dst, b), ','), a.Fields...)
}

// q9 (winning bids), of Flink's Nexmark suite, is an updating query (see
// Updating): per auction, its highest bid (HigherBid: the highest price,
// then the earliest, then the smallest url) among the bids whose dateTime
// lies in [dateTime, expires] of the auction, joined with the auction;
// keyed by the auction's id, as
// "id,itemName,description,initialBid,reserve,dateTime,expires,seller,category,bidder,price,bidDateTime".
// An auction without such a bid has no row.

// AppendQ9 appends the q9 row of auction a won by bid b.
func AppendQ9(dst []byte, a Auction, b Bid) []byte {
	dst = append(append(appendFields(dst, a.ID), ','), a.Fields...)
	return appendFields(append(dst, ','), b.Bidder, b.Price, b.DateTime)
}

// InAuction reports whether bid b is within auction a's lifetime, which
// q9 counts.
func InAuction(b Bid, a Auction) bool { return b.DateTime >= a.DateTime && b.DateTime <= a.Expires }

// expandedBids is the reference q20 over events taken in order.
type expandedBids struct {
	auctions map[int64]Auction // the selected auctions, their fields copied
	out      []byte
}

// add takes event v and returns its output, if it has one; the output is
// valid until the next call.
func (e *expandedBids) add(v []byte) ([]byte, bool, error) {
	if len(v) > 0 && Kind(v[0]) == BidKind {
		b, _, err := ParseBidDetail(v)
		if err != nil {
			return nil, false, err
		}
		if a, ok := e.auctions[b.Auction]; ok {
			e.out = AppendQ20(e.out[:0], b, a)
			return e.out, true, nil
		}
		return nil, false, nil
	}
	k, _, a, err := ParsePersonOrAuction(v)
	if err == nil && k == AuctionKind && a.Category == Q20Category {
		a.Fields = slices.Clone(a.Fields)
		e.auctions[a.ID] = a
	}
	return nil, false, err
}

// q4 (average price for a category), of Flink's Nexmark suite, is an
// updating query over q9's join: per category, the average (the integer
// quotient) of the final prices of its auctions, an auction's final price
// the highest of its bids in its lifetime (auctions without such a bid
// do not count); keyed by the category, as "category,average,auctions".
// Flink's q4 outputs the category and the average: the number of auctions
// is added, so that the runner can tell the input behind a row.

// AppendQ4 appends the q4 row of category, whose auctions' final prices
// sum to sum.
func AppendQ4(dst []byte, category, sum, auctions int64) []byte {
	return appendFields(dst, category, sum/auctions, auctions)
}

// averagePrices returns the reference q4 table over events [from, to).
func averagePrices(seed, from, to uint64) (map[string]string, error) {
	won, err := winningBids(seed, from, to)
	if err != nil {
		return nil, err
	}
	type sum struct{ sum, n int64 }
	categories := map[int64]sum{}
	for _, row := range won {
		f := strings.Split(row, ",")
		category, _ := strconv.ParseInt(f[8], 10, 64)
		price, _ := strconv.ParseInt(f[10], 10, 64)
		s := categories[category]
		categories[category] = sum{s.sum + price, s.n + 1}
	}
	table := map[string]string{}
	for c, s := range categories {
		table[strconv.FormatInt(c, 10)] = string(AppendQ4(nil, c, s.sum, s.n))
	}
	return table, nil
}

// winningBids returns the reference q9 table over events [from, to).
func winningBids(seed, from, to uint64) (map[string]string, error) {
	type won struct {
		a    Auction
		best BidDetail
		bid  bool
	}
	auctions := map[int64]*won{}
	var ev []byte
	for i := from; i < to; i++ {
		if KindOf(i) == PersonKind {
			continue
		}
		ev = Append(ev[:0], seed, i)
		if KindOf(i) == AuctionKind {
			_, _, a, err := ParsePersonOrAuction(ev)
			if err != nil {
				return nil, err
			}
			a.Fields = slices.Clone(a.Fields)
			auctions[a.ID] = &won{a: a}
			continue
		}
		b, _, err := ParseBidDetail(ev)
		if err != nil {
			return nil, err
		}
		if w := auctions[b.Auction]; w != nil && InAuction(b.Bid, w.a) && (!w.bid || HigherBid(b, w.best)) {
			b.Channel, b.URL = nil, slices.Clone(b.URL)
			w.best, w.bid = b, true
		}
	}
	table := map[string]string{}
	for id, w := range auctions {
		if w.bid {
			table[strconv.FormatInt(id, 10)] = string(AppendQ9(nil, w.a, w.best.Bid))
		}
	}
	return table, nil
}

// q6 (average selling price by seller), of Flink's Nexmark suite, is an
// updating query over q4's final prices: per seller, the average (the
// integer quotient) of the final prices of its Q6Auctions latest auctions
// (SellerAuction.Later; an auction without a bid in its lifetime has no
// final price and does not count), keyed by the seller, as
// "seller,average,auctions" with auctions the number of the seller's
// auctions that have a final price (added, as q4's, so that the runner can
// tell the input behind a row). Flink's q6 averages over an OVER window
// (ROWS BETWEEN 10 PRECEDING AND CURRENT ROW) of a GROUP BY's updating
// result, which Flink cannot run: its suite lists q6 as not supported.
// This is Nexmark's definition, "the average selling price per seller for
// their last 10 closed auctions", over the final prices so far, as q4
// takes them.
const Q6Auctions = 10

// SellerAuction is one of a seller's auctions in q6, with its final price.
type SellerAuction struct{ ID, Expires, Price int64 }

// Later reports whether auction a comes after b in q6's order: it expires
// later, or at the same time with a greater id.
func (a SellerAuction) Later(b SellerAuction) bool {
	return a.Expires > b.Expires || a.Expires == b.Expires && a.ID > b.ID
}

// LatestAuctions is q6's state of a seller: its Q6Auctions latest
// auctions with a final price, the latest first, and the number of all
// its auctions with one.
type LatestAuctions struct {
	Latest   []SellerAuction
	Auctions int64
}

// Update sets the final price of auction a, its first when first, and
// returns the new state; l is not changed (a state backend may still be
// encoding it). An auction that is not among the latest when its first
// price comes never is: auctions are only added.
func (l LatestAuctions) Update(a SellerAuction, first bool) LatestAuctions {
	l.Latest = slices.Clone(l.Latest)
	if first {
		l.Auctions++
	}
	at := len(l.Latest)
	for i, b := range l.Latest {
		if b.ID == a.ID {
			l.Latest[i].Price = a.Price
			return l
		}
		if a.Later(b) {
			at = i
			break
		}
	}
	if first && at < Q6Auctions {
		l.Latest = slices.Insert(l.Latest, at, a)
		l.Latest = l.Latest[:min(len(l.Latest), Q6Auctions)]
	}
	return l
}

// AppendQ6 appends the q6 row of seller, whose state is l.
func AppendQ6(dst []byte, seller int64, l LatestAuctions) []byte {
	var sum int64
	for _, a := range l.Latest {
		sum += a.Price
	}
	return appendFields(dst, seller, sum/int64(max(len(l.Latest), 1)), l.Auctions)
}

// sellerAverages returns the reference q6 table over events [from, to).
func sellerAverages(seed, from, to uint64) (map[string]string, error) {
	won, err := winningBids(seed, from, to)
	if err != nil {
		return nil, err
	}
	sellers := map[int64][]SellerAuction{}
	for _, row := range won {
		f := strings.Split(row, ",")
		var a SellerAuction
		a.ID, _ = strconv.ParseInt(f[0], 10, 64)
		a.Expires, _ = strconv.ParseInt(f[6], 10, 64)
		seller, _ := strconv.ParseInt(f[7], 10, 64)
		a.Price, _ = strconv.ParseInt(f[10], 10, 64)
		sellers[seller] = append(sellers[seller], a)
	}
	table := map[string]string{}
	for seller, all := range sellers {
		slices.SortFunc(all, func(a, b SellerAuction) int {
			if a.Later(b) {
				return -1
			}
			return 1
		})
		l := LatestAuctions{Latest: all[:min(len(all), Q6Auctions)], Auctions: int64(len(all))}
		table[strconv.FormatInt(seller, 10)] = string(AppendQ6(nil, seller, l))
	}
	return table, nil
}
