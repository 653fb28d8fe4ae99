package main

import (
	"reflect"
	"testing"

	"github.com/exactlyonce/exactly/bench/nexmark"
)

// TestNewUserCodec round-trips q8's checkpointed accumulator and refuses
// a damaged one.
func TestNewUserCodec(t *testing.T) {
	for _, u := range []newUser{{}, {joined: true, name: []byte("Kate Smith")}, {sold: true}, {joined: true, sold: true, name: []byte("x")}} {
		got, err := newUserCodec{}.Decode(newUserCodec{}.Append(nil, u))
		if err != nil || got.joined != u.joined || got.sold != u.sold || string(got.name) != string(u.name) {
			t.Errorf("round trip of %+v: %+v, %v", u, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {4}, {0xff, 'x'}} {
		if u, err := (newUserCodec{}).Decode(bad); err == nil {
			t.Errorf("Decode(%v) = %+v, no error", bad, u)
		}
	}
}

// TestQ3EventCodec round-trips q3's kept persons and auctions and refuses
// damaged ones.
func TestQ3EventCodec(t *testing.T) {
	for _, e := range []q3Event{{person: true, id: 1007, fields: []byte("Kate Smith,Bend,OR"), inputMillis: 1767225600000}, {id: 1003, seller: 1002, inputMillis: -1}} {
		got, err := q3EventCodec{}.Decode(q3EventCodec{}.Append(nil, e))
		if err != nil || got.person != e.person || got.id != e.id || got.seller != e.seller || got.inputMillis != e.inputMillis || string(got.fields) != string(e.fields) {
			t.Errorf("round trip of %+v: %+v, %v", e, got, err)
		}
	}
	for _, bad := range [][]byte{nil, {2}, {1, 0x80}, {0, 2, 4}} {
		if e, err := (q3EventCodec{}).Decode(bad); err == nil {
			t.Errorf("Decode(%v) = %+v, no error", bad, e)
		}
	}
}

// TestTableCodecs round-trips the updating queries' state and refuses
// damaged entries.
func TestTableCodecs(t *testing.T) {
	b := nexmark.BidDetail{Bid: nexmark.Bid{Auction: 1003, Bidder: 1001, Price: 150, DateTime: 1767225600004}, Channel: []byte("Google"), URL: []byte("https://x/y")}
	top := []nexmark.BidDetail{b, {Bid: nexmark.Bid{Auction: 1003, Price: 90}}}
	if got, err := (topCodec{}).Decode(topCodec{}.Append(nil, top)); err != nil || !reflect.DeepEqual(got[0], b) || len(got) != 2 || got[1].Price != 90 {
		t.Errorf("top round trip: %+v, %v", got, err)
	}
	s := groupStats{BidStats: nexmark.BidStats{Bids: [4]int64{7, 1, 2, 4}, Bidders: [4]int64{5, 1, 2, 3}, Auctions: [4]int64{6, 1, 2, 3}}, minute: "00:16"}
	if got, err := (groupStatsCodec{}).Decode(groupStatsCodec{}.Append(nil, s)); err != nil || got != s {
		t.Errorf("group stats round trip: %+v, %v", got, err)
	}
	a := nexmark.AuctionStats{Bids: [4]int64{3, 1, 1, 1}, Min: 150, Max: 200_000, Sum: 210_000}
	if got, err := (auctionStatsCodec{}).Decode(auctionStatsCodec{}.Append(nil, a)); err != nil || got != a {
		t.Errorf("auction stats round trip: %+v, %v", got, err)
	}
	for _, bad := range [][]byte{{0x80}, append(bidCodec{}.Append(nil, b), 1)} {
		if _, err := (bidCodec{}).Decode(bad); err == nil {
			t.Errorf("bidCodec.Decode(%v): no error", bad)
		}
	}
	if _, err := (auctionStatsCodec{}).Decode(append(auctionStatsCodec{}.Append(nil, a), 0)); err == nil {
		t.Error("auctionStatsCodec.Decode of a longer entry: no error")
	}
	if _, err := (ranksCodec{}).Decode([]byte{1}); err == nil {
		t.Error("ranksCodec.Decode of bit 0: no error")
	}
}

// TestLatestAuctionsCodec round-trips q6's state of a seller and refuses
// a damaged one or one of too many auctions.
func TestLatestAuctionsCodec(t *testing.T) {
	l := nexmark.LatestAuctions{Auctions: 12, Latest: []nexmark.SellerAuction{{ID: 1010, Expires: 1767225700000, Price: 5000}, {ID: 1004, Expires: 1767225650000, Price: 150}}}
	if got, err := (latestAuctionsCodec{}).Decode(latestAuctionsCodec{}.Append(nil, l)); err != nil || !reflect.DeepEqual(got, l) {
		t.Errorf("round trip of %+v: %+v, %v", l, got, err)
	}
	many := nexmark.LatestAuctions{Auctions: 20}
	for i := range int64(nexmark.Q6Auctions + 1) {
		many.Latest = append(many.Latest, nexmark.SellerAuction{ID: i})
	}
	for _, bad := range [][]byte{nil, {0x80}, append(latestAuctionsCodec{}.Append(nil, l), 2), latestAuctionsCodec{}.Append(nil, many)} {
		if got, err := (latestAuctionsCodec{}).Decode(bad); err == nil {
			t.Errorf("Decode(%v) = %+v, no error", bad, got)
		}
	}
}

// TestOpenWindowCodec round-trips q12's state of a bidder and refuses a
// damaged one.
func TestOpenWindowCodec(t *testing.T) {
	w := openWindow{start: 1767225600000, count: 7}
	if got, err := (openWindowCodec{}).Decode(openWindowCodec{}.Append(nil, w)); err != nil || got != w {
		t.Errorf("round trip of %+v: %+v, %v", w, got, err)
	}
	for _, bad := range [][]byte{nil, {2}, append(openWindowCodec{}.Append(nil, w), 0)} {
		if got, err := (openWindowCodec{}).Decode(bad); err == nil {
			t.Errorf("Decode(%v) = %+v, no error", bad, got)
		}
	}
}
