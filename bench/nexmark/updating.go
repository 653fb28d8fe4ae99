package nexmark

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The updating queries of Flink's Nexmark suite compute a table that every
// event may change: a system writes each change of a row as a Kafka record
// whose key is the row's key and whose value is the row (a null value
// deletes it), the way Flink's upsert-kafka sink and a KTable's changelog
// do, and the last value of each key is the result. A run is checked once
// the input is consumed: the table the output's last values make must be
// ReferenceTable's, key by key. Keys and values are comma-separated fields.
//
//   - q15 (bidding statistics report): one row per day (yyyy-MM-dd, UTC,
//     of the bid's dateTime), keyed by day, as
//     "day,bids,bids1,bids2,bids3,bidders,bidders1,bidders2,bidders3,auctions,auctions1,auctions2,auctions3":
//     the number of bids, of distinct bidders and of distinct auctions,
//     in all and by price rank (see PriceRank).
//   - q16 (channel statistics report): the same per channel and day,
//     keyed "channel,day", as "channel,day,minute,bids,…,auctions3" with
//     minute the latest HH:mm of the group's bids.
//   - q17 (auction statistics report): per auction and day, keyed
//     "auction,day", as "auction,day,bids,bids1,bids2,bids3,min,max,avg,sum"
//     of the prices (avg the integer quotient, as Flink's AVG of a BIGINT).
//   - q18 (find last bid): per bidder and auction, keyed "bidder,auction",
//     its last bid as "auction,bidder,price,channel,url,dateTime": the one
//     of the latest dateTime, of the highest price among those, of the
//     greatest url among those (Flink's q18 orders by dateTime alone; this
//     generator makes bids of one bidder on one auction in the same
//     millisecond, which would leave the result to the order of arrival).
//   - q19 (auction top-10 price): per auction its Q19Rows highest bids,
//     keyed "auction,rank" (rank 1 the highest), as
//     "auction,bidder,price,channel,url,dateTime,rank", ordered by price
//     descending, then dateTime, then url ascending.
//
// Flink's q15–q17 rank prices below 10,000 and from 1,000,000; this
// generator's prices span 100–1,000,000 cents, so the bounds are a tenth
// and a hundredth of those (see PriceRank).

// Price ranks of q15–q17: rank 1 below Rank2From, rank 3 from Rank3From,
// rank 2 between.
const (
	Rank2From = 1_000
	Rank3From = 100_000
)

// Q19Rows is the number of rows q19 keeps per auction.
const Q19Rows = 10

// PriceRank returns the rank of price, 1 to 3.
func PriceRank(price int64) int {
	switch {
	case price < Rank2From:
		return 1
	case price < Rank3From:
		return 2
	}
	return 3
}

// Updating reports whether query q's result is checked as a table (see
// ReferenceTable): one that its output updates, or for q12 one that the
// sums of its rows per key make (see Summing).
func Updating(q string) bool {
	switch q {
	case "q4", "q6", "q9", "q12", "q15", "q16", "q17", "q18", "q19":
		return true
	}
	return false
}

// Day and Minute are DATE_FORMAT(dateTime, 'yyyy-MM-dd') and
// DATE_FORMAT(dateTime, 'HH:mm') in UTC.
func Day(dateTime int64) string    { return time.UnixMilli(dateTime).UTC().Format("2006-01-02") }
func Minute(dateTime int64) string { return time.UnixMilli(dateTime).UTC().Format("15:04") }

// BidStats is the row of q15 and q16 without its key fields: counts of
// bids, distinct bidders and distinct auctions, each in all ([0]) and by
// price rank ([1] to [3]).
type BidStats struct {
	Bids, Bidders, Auctions [4]int64
}

// Append appends the counts as q15's and q16's rows end.
func (s BidStats) Append(dst []byte) []byte {
	for _, c := range [][4]int64{s.Bids, s.Bidders, s.Auctions} {
		for _, n := range c {
			dst = strconv.AppendInt(append(dst, ','), n, 10)
		}
	}
	return dst
}

// DistinctRanks tracks, for one counted field (bidder or auction), the
// price ranks it was seen at as a bit set: bit r for rank r.
type DistinctRanks uint8

// Count counts a bid of rank r by a field value seen at the ranks seen
// so far (0: never) into the distinct counts c, and returns its new set.
func (seen DistinctRanks) Count(r int, c *[4]int64) DistinctRanks {
	if seen == 0 {
		c[0]++
	}
	if seen&(1<<r) == 0 {
		c[r]++
	}
	return seen | 1<<r
}

// AuctionStats is q17's row without its key fields.
type AuctionStats struct {
	Bids          [4]int64
	Min, Max, Sum int64
}

// Add counts a bid at price into s.
func (s AuctionStats) Add(price int64) AuctionStats {
	if s.Bids[0] == 0 || price < s.Min {
		s.Min = price
	}
	s.Max = max(s.Max, price)
	s.Sum += price
	s.Bids[0]++
	s.Bids[PriceRank(price)]++
	return s
}

// AppendQ17 appends q17's row of auction on day.
func AppendQ17(dst []byte, auction int64, day string, s AuctionStats) []byte {
	dst = append(append(strconv.AppendInt(dst, auction, 10), ','), day...)
	for _, n := range append(s.Bids[:], s.Min, s.Max, s.Sum/s.Bids[0], s.Sum) {
		dst = strconv.AppendInt(append(dst, ','), n, 10)
	}
	return dst
}

// AppendBidRow appends the bid's fields q18 and q19 output:
// "auction,bidder,price,channel,url,dateTime".
func AppendBidRow(dst []byte, b BidDetail) []byte {
	dst = appendFields(dst, b.Auction, b.Bidder, b.Price)
	dst = append(append(append(append(append(dst, ','), b.Channel...), ','), b.URL...), ',')
	return strconv.AppendInt(dst, b.DateTime, 10)
}

// LaterBid reports whether q18 keeps bid a over bid b of the same bidder
// and auction: a later dateTime, then a higher price, then a greater url.
func LaterBid(a, b BidDetail) bool {
	if a.DateTime != b.DateTime {
		return a.DateTime > b.DateTime
	}
	if a.Price != b.Price {
		return a.Price > b.Price
	}
	return string(a.URL) > string(b.URL)
}

// HigherBid reports whether q19 ranks bid a above bid b of the same
// auction: a higher price, then an earlier dateTime, then a smaller url.
func HigherBid(a, b BidDetail) bool {
	if a.Price != b.Price {
		return a.Price > b.Price
	}
	if a.DateTime != b.DateTime {
		return a.DateTime < b.DateTime
	}
	return string(a.URL) < string(b.URL)
}

// AddPair adds a row of a table, key and value, to the digest: the
// digest of a table is that of its rows.
func (d *Digest) AddPair(key, value []byte) {
	d.Add(PairBytes(nil, key, value))
}

// PairBytes appends the bytes a table's row is hashed as: key, a zero
// byte, value.
func PairBytes(dst, key, value []byte) []byte {
	return append(append(append(dst, key...), 0), value...)
}

// ReferenceTable returns the table the updating query q computes over
// events [from, to) of the stream seeded by seed, by key.
func ReferenceTable(q string, seed, from, to uint64) (map[string]string, error) {
	if !Updating(q) {
		return nil, fmt.Errorf("nexmark: %q is not an updating query", q)
	}
	switch q {
	case "q4":
		return averagePrices(seed, from, to)
	case "q6":
		return sellerAverages(seed, from, to)
	case "q12":
		return bidsPerBidder(seed, from, to), nil
	case "q9":
		return winningBids(seed, from, to)
	}
	type bidStats struct {
		s        BidStats
		minute   string
		bidders  map[int64]DistinctRanks
		auctions map[int64]DistinctRanks
	}
	var (
		stats    = map[string]*bidStats{}
		auctions = map[string]AuctionStats{}
		last     = map[string]BidDetail{}
		top      = map[int64][]BidDetail{}
		ev       []byte
	)
	for i := from; i < to; i++ {
		if KindOf(i) != BidKind {
			continue
		}
		ev = Append(ev[:0], seed, i)
		b, _, err := ParseBidDetail(ev)
		if err != nil {
			return nil, err
		}
		day := Day(b.DateTime)
		switch q {
		case "q15", "q16":
			key := day
			if q == "q16" {
				key = string(b.Channel) + "," + day
			}
			s := stats[key]
			if s == nil {
				s = &bidStats{bidders: map[int64]DistinctRanks{}, auctions: map[int64]DistinctRanks{}}
				stats[key] = s
			}
			r := PriceRank(b.Price)
			s.s.Bids[0]++
			s.s.Bids[r]++
			s.bidders[b.Bidder] = s.bidders[b.Bidder].Count(r, &s.s.Bidders)
			s.auctions[b.Auction] = s.auctions[b.Auction].Count(r, &s.s.Auctions)
			s.minute = max(s.minute, Minute(b.DateTime))
		case "q17":
			key := strconv.FormatInt(b.Auction, 10) + "," + day
			auctions[key] = auctions[key].Add(b.Price)
		case "q18":
			key := strconv.FormatInt(b.Bidder, 10) + "," + strconv.FormatInt(b.Auction, 10)
			if old, ok := last[key]; !ok || LaterBid(b, old) {
				b.Channel, b.URL = slices.Clone(b.Channel), slices.Clone(b.URL)
				last[key] = b
			}
		case "q19":
			t := top[b.Auction]
			at := len(t)
			for at > 0 && HigherBid(b, t[at-1]) {
				at--
			}
			if at < Q19Rows {
				b.Channel, b.URL = slices.Clone(b.Channel), slices.Clone(b.URL)
				t = slices.Insert(t, at, b)
				top[b.Auction] = t[:min(len(t), Q19Rows)]
			}
		}
	}
	table := map[string]string{}
	for key, s := range stats {
		row := []byte(key)
		if q == "q16" {
			row = append(append(row, ','), s.minute...)
		}
		table[key] = string(s.s.Append(row))
	}
	for key, s := range auctions {
		auction, day, _ := strings.Cut(key, ",")
		a, _ := strconv.ParseInt(auction, 10, 64)
		table[key] = string(AppendQ17(nil, a, day, s))
	}
	for key, b := range last {
		table[key] = string(AppendBidRow(nil, b))
	}
	for auction, t := range top {
		for r, b := range t {
			table[Q19Key(auction, r+1)] = string(strconv.AppendInt(append(AppendBidRow(nil, b), ','), int64(r+1), 10))
		}
	}
	return table, nil
}

// Q19Key is q19's key of the row of rank (1 the highest) of auction.
func Q19Key(auction int64, rank int) string {
	return strconv.FormatInt(auction, 10) + "," + strconv.Itoa(rank)
}

// RowProgress returns what a row of the updating query q says of the input
// its system had read when it wrote the row, so that a runner can tell the
// input behind the output visible at a time: for q15–q17, the bids the
// row counts (summed, true: the sum over the table's last rows is the bids
// read; for q4 and q6, the auctions they count; for q12, the bids of its
// summed table's rows); for q9, q18 and q19, the
// dateTime of its bid (summed, false: the
// greatest over the rows is about the event time read up to).
func RowProgress(q string, value []byte) (n int64, summed bool, err error) {
	field, summed := map[string]int{"q4": 2, "q6": 2, "q9": 11, "q12": 1, "q15": 1, "q16": 3, "q17": 2, "q18": 5, "q19": 5}[q], SummedProgress(q)
	if field == 0 {
		return 0, false, fmt.Errorf("nexmark: %q is not an updating query", q)
	}
	f := value
	for range field {
		c := slices.Index(f, ',')
		if c < 0 {
			return 0, false, fmt.Errorf("nexmark: a %s row of fewer than %d fields: %q", q, field+1, value)
		}
		f = f[c+1:]
	}
	if c := slices.Index(f, ','); c >= 0 {
		f = f[:c]
	}
	n, ok := parseInt(f)
	if !ok {
		return 0, false, fmt.Errorf("nexmark: field %d of a %s row is not an integer: %q", field+1, q, value)
	}
	return n, summed, nil
}

// SummedProgress reports whether the progress of the updating query q's
// rows is summed over its table, not the greatest (see RowProgress).
func SummedProgress(q string) bool {
	return q == "q4" || q == "q6" || q == "q12" || q == "q15" || q == "q16" || q == "q17"
}

// EventsBehind returns about how many events a system had read whose
// output rows of the updating query q say progress (see RowProgress):
// bids or auctions counted, or the latest dateTime.
func EventsBehind(q string, progress int64) float64 {
	switch {
	case q == "q4" || q == "q6":
		return float64(progress) * ProportionDenominator / AuctionProportion
	case SummedProgress(q):
		return float64(progress) * ProportionDenominator / BidProportion
	}
	return float64(progress-BaseTime) * 1000 / EventSpacingMicros
}
