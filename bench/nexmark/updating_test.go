package nexmark

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestReferenceTables checks the updating queries' reference tables on
// the generator's stream against plain counts and sorts of their own.
func TestReferenceTables(t *testing.T) {
	const n = 200_000
	var bids []BidDetail
	for i := range uint64(n) {
		b, ok, err := ParseBidDetail(Append(nil, 3, i))
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			b.Channel, b.URL = slices.Clone(b.Channel), slices.Clone(b.URL)
			bids = append(bids, b)
		}
	}
	table := func(q string) map[string]string {
		tb, err := ReferenceTable(q, 3, 0, n)
		if err != nil {
			t.Fatal(err)
		}
		return tb
	}
	field := func(row string, i int) int64 {
		v, err := strconv.ParseInt(strings.Split(row, ",")[i], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	q15 := table("q15")
	day := Day(bids[0].DateTime)
	if len(q15) != 1 || field(q15[day], 1) != int64(len(bids)) {
		t.Fatalf("q15: %v, want one day with %d bids", q15, len(bids))
	}
	bidders, ranked := map[int64]bool{}, [4]int64{}
	for _, b := range bids {
		bidders[b.Bidder] = true
		ranked[PriceRank(b.Price)]++
	}
	if row := q15[day]; field(row, 5) != int64(len(bidders)) || field(row, 2) != ranked[1] || field(row, 3) != ranked[2] || field(row, 4) != ranked[3] {
		t.Errorf("q15 row %s: want %d bidders, bids by rank %v", row, len(bidders), ranked[1:])
	}
	if ranked[1] == 0 || ranked[2] == 0 || ranked[3] == 0 {
		t.Errorf("a price rank has no bids: %v", ranked[1:])
	}

	var sum int64
	for _, row := range table("q16") {
		sum += field(row, 3)
	}
	if sum != int64(len(bids)) {
		t.Errorf("q16: %d bids in all, want %d", sum, len(bids))
	}

	q17 := table("q17")
	sum = 0
	for key, row := range q17 {
		if !strings.HasPrefix(row, key+",") {
			t.Fatalf("q17 row %q under key %q", row, key)
		}
		sum += field(row, 2)
		if lo, hi, avg := field(row, 6), field(row, 7), field(row, 8); lo > avg || avg > hi {
			t.Errorf("q17 row %s: min %d, avg %d, max %d", row, lo, avg, hi)
		}
	}
	if sum != int64(len(bids)) {
		t.Errorf("q17: %d bids in all, want %d", sum, len(bids))
	}

	q18 := table("q18")
	latest := map[string]int64{}
	for _, b := range bids {
		k := strconv.FormatInt(b.Bidder, 10) + "," + strconv.FormatInt(b.Auction, 10)
		latest[k] = max(latest[k], b.DateTime)
	}
	if len(q18) != len(latest) {
		t.Errorf("q18: %d rows, want %d", len(q18), len(latest))
	}
	for k, at := range latest {
		if got := field(q18[k], 5); got != at {
			t.Errorf("q18 %s: dateTime %d, want %d", k, got, at)
		}
	}

	q19 := table("q19")
	byAuction := map[int64][]BidDetail{}
	for _, b := range bids {
		byAuction[b.Auction] = append(byAuction[b.Auction], b)
	}
	rows := 0
	for auction, bs := range byAuction {
		slices.SortStableFunc(bs, func(a, b BidDetail) int {
			if HigherBid(a, b) {
				return -1
			}
			if HigherBid(b, a) {
				return 1
			}
			return 0
		})
		for r := range min(len(bs), Q19Rows) {
			rows++
			want := string(AppendBidRow(nil, bs[r])) + "," + strconv.Itoa(r+1)
			if got := q19[Q19Key(auction, r+1)]; got != want {
				t.Fatalf("q19 %d rank %d: %q, want %q", auction, r+1, got, want)
			}
		}
	}
	if len(q19) != rows {
		t.Errorf("q19: %d rows, want %d", len(q19), rows)
	}
}

func TestRowProgress(t *testing.T) {
	for _, c := range []struct {
		q, row string
		n      int64
		summed bool
	}{
		{"q15", "2026-01-01,7,1,2,4,5,1,2,3,6,1,2,3", 7, true},
		{"q4", "10,5000,7", 7, true},
		{"q6", "1001,5000,12", 12, true},
		{"q12", "1001,5", 5, true},
		{"q16", "Google,2026-01-01,00:16,9,1,2,6,5,1,2,3,6,1,2,3", 9, true},
		{"q17", "1003,2026-01-01,3,1,1,1,150,200000,70000,210000", 3, true},
		{"q18", "1003,1001,150,Google,https://x/y,1767225600004", 1767225600004, false},
		{"q19", "1003,1001,150,Google,https://x/y,1767225600004,2", 1767225600004, false},
	} {
		n, summed, err := RowProgress(c.q, []byte(c.row))
		if err != nil || n != c.n || summed != c.summed {
			t.Errorf("RowProgress(%s, %q) = %d, %v, %v; want %d, %v", c.q, c.row, n, summed, err, c.n, c.summed)
		}
	}
	for _, bad := range []struct{ q, row string }{{"q15", "2026-01-01"}, {"q18", "1,2,3,4,5,x"}, {"q1", "1,2"}} {
		if _, _, err := RowProgress(bad.q, []byte(bad.row)); err == nil {
			t.Errorf("RowProgress(%s, %q): no error", bad.q, bad.row)
		}
	}
	if got := EventsBehind("q15", 46); got != 50 {
		t.Errorf("EventsBehind(46 bids) = %v, want 50", got)
	}
	if got := EventsBehind("q4", 3); got != 50 {
		t.Errorf("EventsBehind(3 auctions) = %v, want 50", got)
	}
	if got := EventsBehind("q18", BaseTime+1000); got != 10_000 {
		t.Errorf("EventsBehind(1 s of event time) = %v, want 10,000", got)
	}
}

// TestLatestAuctions: q6's state of a seller, fed the final prices of its
// auctions in any order and with later raises, keeps the Q6Auctions
// latest (expires, then id) with their last prices, counts every auction
// with a price, and leaves the state it was given unchanged; its row is
// the reference's.
func TestLatestAuctions(t *testing.T) {
	var all []SellerAuction
	for i := range int64(25) {
		all = append(all, SellerAuction{ID: 100 + i, Expires: 1000 + i/2*10, Price: 10 * (i + 1)})
	}
	order := []int{24, 3, 17, 0, 11, 22, 5, 23, 9, 14, 1, 20, 7, 18, 2, 21, 12, 6, 15, 4, 19, 8, 13, 16, 10}
	var l LatestAuctions
	for _, i := range order {
		before := slices.Clone(l.Latest)
		next := l.Update(all[i], true)
		if !slices.Equal(l.Latest, before) {
			t.Fatal("Update changed the state it was given")
		}
		l = next.Update(SellerAuction{ID: all[i].ID, Expires: all[i].Expires, Price: all[i].Price + 1}, false)
	}
	if l.Auctions != 25 || len(l.Latest) != Q6Auctions {
		t.Fatalf("%d auctions, %d latest; want 25 and %d", l.Auctions, len(l.Latest), Q6Auctions)
	}
	var sum int64
	for r, a := range l.Latest {
		want := all[24-r]
		if a.ID != want.ID || a.Price != want.Price+1 {
			t.Fatalf("latest %d: %+v, want auction %d at %d", r, a, want.ID, want.Price+1)
		}
		sum += a.Price
	}
	if got, want := string(AppendQ6(nil, 7, l)), "7,"+strconv.FormatInt(sum/Q6Auctions, 10)+",25"; got != want {
		t.Fatalf("AppendQ6 = %q, want %q", got, want)
	}
}

// TestParseQ12 reads back the rows AppendQ12 writes and refuses others.
func TestParseQ12(t *testing.T) {
	row := AppendQ12(nil, 1001, 7, 1767225600000)
	if string(row) != "1001,7,1767225600000,1767225610000" {
		t.Fatalf("AppendQ12 = %q", row)
	}
	if bidder, n, err := ParseQ12(row); bidder != 1001 || n != 7 || err != nil {
		t.Fatalf("ParseQ12(%q) = %d, %d, %v", row, bidder, n, err)
	}
	for _, bad := range []string{"", "1001", "1001,7", "1001,x,1,2", "x,7,1,2", "1001,0,1,2"} {
		if _, _, err := ParseQ12([]byte(bad)); err == nil {
			t.Errorf("ParseQ12(%q): no error", bad)
		}
	}
}
