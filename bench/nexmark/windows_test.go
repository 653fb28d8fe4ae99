package nexmark

import (
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
)

// bidsOf collects the bids of events [from, to).
func bidsOf(seed, from, to uint64) []Bid { return slices.Collect(Bids(seed, from, to)) }

// within returns the bids of sorted in [start, end).
func within(sorted []Bid, start, end int64) []Bid {
	i := sort.Search(len(sorted), func(i int) bool { return sorted[i].DateTime >= start })
	j := sort.Search(len(sorted), func(i int) bool { return sorted[i].DateTime >= end })
	return sorted[i:j]
}

// bruteQ7 computes q7 window by window from its definition.
func bruteQ7(bids []Bid, upTo int64) []string {
	var out []string
	if len(bids) == 0 {
		return nil
	}
	for s := alignDown(bids[0].DateTime, Q7Size); s+Q7Size <= upTo; s += Q7Size {
		in := within(bids, s, s+Q7Size)
		var best int64 = -1
		for _, b := range in {
			best = max(best, b.Price)
		}
		for _, b := range in {
			if b.Price == best {
				out = append(out, string(AppendQ7(nil, s, b)))
			}
		}
	}
	return out
}

// bruteQ5 computes q5 window by window from its definition.
func bruteQ5(bids []Bid, upTo int64) []string {
	var out []string
	if len(bids) == 0 {
		return nil
	}
	for s := alignDown(bids[0].DateTime, Q5Slide) - Q5Size + Q5Slide; s+Q5Size <= upTo; s += Q5Slide {
		counts := map[int64]int64{}
		var most int64
		for _, b := range within(bids, s, s+Q5Size) {
			counts[b.Auction]++
			most = max(most, counts[b.Auction])
		}
		for _, a := range slices.Sorted(maps.Keys(counts)) {
			if counts[a] == most {
				out = append(out, string(AppendQ5(nil, s, a, most)))
			}
		}
	}
	return out
}

// q7Of and q5Of run the reference implementations, outputs formatted.
func q7Of(t *testing.T, bids []Bid, upTo int64) []string {
	t.Helper()
	var out []string
	if err := HighestBids(slices.Values(bids), upTo, func(s int64, b Bid) { out = append(out, string(AppendQ7(nil, s, b))) }); err != nil {
		t.Fatal(err)
	}
	return out
}

func q5Of(t *testing.T, bids []Bid, upTo int64) []string {
	t.Helper()
	var out []string
	if err := HotItems(slices.Values(bids), upTo, func(s, a, n int64) { out = append(out, string(AppendQ5(nil, s, a, n))) }); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBidsAreTheBidsAppendWrites(t *testing.T) {
	bids := bidsOf(5, 1000, 6000)
	var k int
	for i := uint64(1000); i < 6000; i++ {
		b, ok, err := ParseBid(Append(nil, 5, i))
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		if bids[k] != b {
			t.Fatalf("event %d: Bids says %+v, Append wrote %+v", i, bids[k], b)
		}
		k++
	}
	if k != len(bids) {
		t.Fatalf("Bids yields %d bids, Append wrote %d", len(bids), k)
	}
}

func TestHighestBidsByHand(t *testing.T) {
	bids := []Bid{
		{Auction: 9, Bidder: 1, Price: 3, DateTime: -1}, // window [-10000, 0)
		{Auction: 1, Bidder: 1, Price: 5, DateTime: 0},
		{Auction: 2, Bidder: 2, Price: 7, DateTime: 9999},
		{Auction: 3, Bidder: 3, Price: 7, DateTime: 9999}, // a tie
		{Auction: 4, Bidder: 4, Price: 1, DateTime: 10000},
		{Auction: 5, Bidder: 5, Price: 2, DateTime: 25000}, // after an empty window? no: [20000, 30000)
		{Auction: 6, Bidder: 6, Price: 1, DateTime: 25001},
	}
	want := []string{"-10000,9,1,3,-1", "0,2,2,7,9999", "0,3,3,7,9999", "10000,4,4,1,10000", "20000,5,5,2,25000"}
	if got := q7Of(t, bids, 30000); !slices.Equal(got, want) {
		t.Errorf("up to 30000: %q, want %q", got, want)
	}
	if got := q7Of(t, bids, 29999); !slices.Equal(got, want[:4]) {
		t.Errorf("up to 29999: %q, want %q", got, want[:4])
	}
	if got := q7Of(t, nil, 30000); got != nil {
		t.Errorf("no bids: %q", got)
	}
}

func TestHotItemsByHand(t *testing.T) {
	bids := []Bid{
		{Auction: 1, DateTime: 0},
		{Auction: 2, DateTime: 1000},
		{Auction: 2, DateTime: 2500},
		{Auction: 1, DateTime: 11000},
		{Auction: 7, DateTime: 100_000}, // after a gap of empty windows
	}
	want := []string{
		"-8000,1,1", "-8000,2,1", // [-8000, 2000): bids at 0 and 1000, a tie
		"-6000,2,2", "-4000,2,2", "-2000,2,2", "0,2,2",
		"2000,1,1", "2000,2,1", // [2000, 12000): bids at 2500 and 11000
		"4000,1,1", "6000,1,1", "8000,1,1", "10000,1,1",
	}
	if got := q5Of(t, bids, 20000); !slices.Equal(got, want) {
		t.Errorf("up to 20000:\n got %q\nwant %q", got, want)
	}
	if got := q5Of(t, bids, 19999); !slices.Equal(got, want[:len(want)-1]) {
		t.Errorf("up to 19999: %q", got)
	}
	gap := append(slices.Clone(want), "92000,7,1", "94000,7,1", "96000,7,1", "98000,7,1", "100000,7,1")
	if got := q5Of(t, bids, 110_000); !slices.Equal(got, gap) {
		t.Errorf("up to 110000:\n got %q\nwant %q", got, gap)
	}
}

func TestWindowedNeedEventTimeOrder(t *testing.T) {
	bids := slices.Values([]Bid{{DateTime: 5}, {DateTime: 4}})
	if err := HighestBids(bids, 100_000, func(int64, Bid) {}); err == nil {
		t.Error("HighestBids: no error on a bid older than the one before")
	}
	if err := HotItems(bids, 100_000, func(_, _, _ int64) {}); err == nil {
		t.Error("HotItems: no error on a bid older than the one before")
	}
}

// TestWindowedMatchBruteForce checks the reference implementations, which
// close windows as event time passes, against the definitions applied to
// every window: on generated streams, with and without partial first
// windows, and on random streams of few auctions and prices, where most
// windows have ties, and gaps of empty windows.
func TestWindowedMatchBruteForce(t *testing.T) {
	streams := map[string][]Bid{"seed 1": bidsOf(1, 0, 1_000_000), "seed 2 from 123457": bidsOf(2, 123_457, 700_001)}
	r := rand.New(rand.NewPCG(1, 2))
	for k := range 3 {
		var bids []Bid
		for t := int64(-30_000); t < 200_000; t += r.Int64N(800) * int64(r.IntN(2)*k*k*20+1) {
			bids = append(bids, Bid{Auction: r.Int64N(5), Bidder: r.Int64N(1000), Price: r.Int64N(4), DateTime: t})
		}
		streams[fmt.Sprintf("random %d", k)] = bids
	}
	var q5Ties, q7Ties int
	for name, bids := range streams {
		last := bids[len(bids)-1].DateTime
		for _, upTo := range []int64{last - CheckMargin, last, last + 2*Q5Size} {
			got, want := q7Of(t, bids, upTo), bruteQ7(bids, upTo)
			if !slices.Equal(got, want) || len(got) == 0 {
				t.Errorf("q7 %s up to %d: %d outputs, brute force %d", name, upTo, len(got), len(want))
			}
			q7Ties += len(got) - windows(got)
			got, want = q5Of(t, bids, upTo), bruteQ5(bids, upTo)
			if !slices.Equal(got, want) || len(got) == 0 {
				t.Errorf("q5 %s up to %d: %d outputs, brute force %d", name, upTo, len(got), len(want))
			}
			q5Ties += len(got) - windows(got)
		}
	}
	if q5Ties == 0 || q7Ties == 0 {
		t.Errorf("tied outputs: q5 %d, q7 %d: the ties are not exercised", q5Ties, q7Ties)
	}
}

// windows returns the number of distinct windows of outputs.
func windows(outputs []string) int {
	starts := map[string]bool{}
	for _, v := range outputs {
		starts[strings.SplitN(v, ",", 2)[0]] = true
	}
	return len(starts)
}

func TestCheckedOutputsAndExpected(t *testing.T) {
	const n = 500_000
	bids := bidsOf(1, 0, n)
	for q, want := range map[string][]string{"q5": bruteQ5(bids, Cutoff(n)), "q7": bruteQ7(bids, Cutoff(n))} {
		var got []string
		if err := CheckedOutputs(q, 1, 0, n, func(v []byte) { got = append(got, string(v)) }); err != nil || !slices.Equal(got, want) {
			t.Errorf("CheckedOutputs(%s): %v, %d outputs, brute force %d", q, err, len(got), len(want))
		}
		if got, err := Expected(q, 1, 0, n); err != nil || got != uint64(len(want)) {
			t.Errorf("Expected(%s) = %d, %v; want %d", q, got, err, len(want))
		}
		if got, err := Expected(q, 1, 0, 0); err != nil || got != 0 {
			t.Errorf("Expected(%s, no events) = %d, %v", q, got, err)
		}
	}
}

func TestCheckedOutputsOfPerRecordQuery(t *testing.T) {
	if err := CheckedOutputs("q1", 1, 0, 10, func([]byte) {}); err == nil {
		t.Error("CheckedOutputs(q1): no error")
	}
}

func TestCutoffAndWindowStart(t *testing.T) {
	const n = 300_000 // the last event is at BaseTime+29999
	if c := Cutoff(n); c != BaseTime+26_999 {
		t.Fatalf("Cutoff(%d) = %d, want BaseTime+26999", n, c)
	}
	if Cutoff(0) != math.MinInt64 {
		t.Errorf("Cutoff(0) = %d", Cutoff(0))
	}
	for v, want := range map[string]int64{"1767225610000,1,2,3,1767225610001": 1767225610000, "-2000,1100,7": -2000} {
		if got, err := WindowStart([]byte(v)); err != nil || got != want {
			t.Errorf("WindowStart(%q) = %d, %v; want %d", v, got, err, want)
		}
	}
	for _, bad := range []string{"", "17x,1,1", "1767225610000"} {
		if _, err := WindowStart([]byte(bad)); err == nil {
			t.Errorf("WindowStart(%q): no error", bad)
		}
	}
	for q, want := range map[string][2]int64{"q5": {Q5Size, Q5Slide}, "q7": {Q7Size, Q7Size}, "q1": {0, 0}} {
		size, slide, ok := Window(q)
		if [2]int64{size, slide} != want || ok != (q != "q1") {
			t.Errorf("Window(%s) = %d, %d, %v", q, size, slide, ok)
		}
	}
}
