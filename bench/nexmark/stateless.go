package nexmark

import (
	"bytes"
	"fmt"
	"time"
)

// The stateless queries past q2 read the bid's channel and url too:
// BidDetail is a bid with them.
//
//   - q14 (calculation): each bid whose priceEuro (as q1's) lies in
//     (Q14MinEuro, Q14MaxEuro), as
//     "auction,bidder,priceEuro,bidTimeType,dateTime,cCount": bidTimeType
//     is "dayTime" when the UTC hour of dateTime is 8–18, "nightTime" when
//     it is at most 6 or at least 20, "otherTime" else; cCount is the
//     number of 'c' in the url. Flink's q14 filters 0.908·price in
//     (1,000,000, 50,000,000) and counts the 'c' of the bid's extra: this
//     generator's prices span $1–$10,000, not $1–$1,000,000, so the bounds
//     are a hundredth, selecting 37% of the bids (Flink's 28%), and its
//     bids have no extra, so the url is counted.
//   - q21 (add channel id): each bid as
//     "auction,bidder,price,channel,channelID": channelID is 0, 1, 2, 3
//     for the channels Apple, Google, Facebook and Baidu (in any case),
//     else the value of the url's channel_id parameter; a bid with neither
//     is dropped (this generator makes none).
//   - q22 (url directories): each bid as
//     "auction,bidder,price,channel,dir1,dir2,dir3", the url's path
//     segments 1 to 3 (SPLIT_INDEX(url, '/', 3..5)); a missing one is
//     empty.
//   - q10 (log to file system): each bid as
//     "auction,bidder,price,dateTime,day,minute", day its UTC date
//     (yyyy-MM-dd) and minute its UTC time of day (HH:mm), the partition
//     columns of Flink's q10, which writes them to files; here, as every
//     query, to Kafka. Its bids have no extra, so it is left out.
//   - q13 (bounded side input join): each bid as
//     "auction,bidder,price,dateTime,value", value the side input's value
//     of key auction mod SideInputKeys. The side input is a file of
//     SideInputKeys lines "key,value" (AppendSideInput) that each system
//     loads at its start, as Flink's q13 joins a bounded table.
type BidDetail struct {
	Bid
	Channel, URL []byte // subslices of the parsed value
}

// The q14 bounds, exclusive, in euro cents.
const (
	Q14MinEuro = 10_000
	Q14MaxEuro = 500_000
)

// ParseBidDetail parses v as ParseBid does, with the channel and the url.
func ParseBidDetail(v []byte) (b BidDetail, ok bool, err error) {
	if b.Bid, ok, err = ParseBid(v); !ok || err != nil {
		return b, ok, err
	}
	// ParseBid checked the fields: auction,bidder,price,channel,url,...
	rest := v[2:]
	for range 3 {
		rest = rest[bytes.IndexByte(rest, ',')+1:]
	}
	c := bytes.IndexByte(rest, ',')
	b.Channel, rest = rest[:c], rest[c+1:]
	b.URL = rest[:bytes.IndexByte(rest, ',')]
	return b, true, nil
}

// Q14Selects reports whether q14 outputs bid b.
func Q14Selects(b Bid) bool {
	e := b.Price * EuroRateNum / EuroRateDen
	return e > Q14MinEuro && e < Q14MaxEuro
}

// BidTimeType is q14's kind of the hour of dateTime (Unix ms, UTC).
func BidTimeType(dateTime int64) string {
	switch h := time.UnixMilli(dateTime).UTC().Hour(); {
	case h >= 8 && h <= 18:
		return "dayTime"
	case h <= 6 || h >= 20:
		return "nightTime"
	}
	return "otherTime"
}

// AppendQ14 appends the q14 output of b.
func AppendQ14(dst []byte, b BidDetail) []byte {
	dst = appendFields(dst, b.Auction, b.Bidder, b.Price*EuroRateNum/EuroRateDen)
	dst = append(append(append(dst, ','), BidTimeType(b.DateTime)...), ',')
	return appendFields(dst, b.DateTime, int64(bytes.Count(b.URL, []byte{'c'})))
}

// channelIDs are q21's ids of the named channels, by lower-case name.
var channelIDs = map[string]string{"apple": "0", "google": "1", "facebook": "2", "baidu": "3"}

// Q21ChannelID returns q21's channel id of b; ok is false when b has
// none (q21 drops it).
func Q21ChannelID(b BidDetail) (id []byte, ok bool) {
	if len(b.Channel) <= len("facebook") {
		var lower [8]byte
		n := copy(lower[:], b.Channel)
		for i := range n {
			if c := lower[i]; c >= 'A' && c <= 'Z' {
				lower[i] = c + 'a' - 'A'
			}
		}
		if id, ok := channelIDs[string(lower[:n])]; ok {
			return []byte(id), true
		}
	}
	return urlParam(b.URL, "channel_id")
}

// urlParam is REGEXP_EXTRACT(url, '(&|^)name=([^&]*)', 2): the value of
// the first parameter name at the start of url or after a '&'.
func urlParam(url []byte, name string) ([]byte, bool) {
	for i := 0; i <= len(url); {
		if bytes.HasPrefix(url[i:], []byte(name)) && i+len(name) < len(url) && url[i+len(name)] == '=' {
			v := url[i+len(name)+1:]
			if j := bytes.IndexByte(v, '&'); j >= 0 {
				v = v[:j]
			}
			return v, true
		}
		j := bytes.IndexByte(url[i:], '&')
		if j < 0 {
			break
		}
		i += j + 1
	}
	return nil, false
}

// AppendQ21 appends the q21 output of b, whose channel id is id.
func AppendQ21(dst []byte, b BidDetail, id []byte) []byte {
	dst = appendFields(dst, b.Auction, b.Bidder, b.Price)
	dst = append(append(append(dst, ','), b.Channel...), ',')
	return append(dst, id...)
}

// AppendQ22 appends the q22 output of b.
func AppendQ22(dst []byte, b BidDetail) []byte {
	dst = appendFields(dst, b.Auction, b.Bidder, b.Price)
	dst = append(append(dst, ','), b.Channel...)
	for i := 3; i <= 5; i++ {
		dst = append(append(dst, ','), splitIndex(b.URL, '/', i)...)
	}
	return dst
}

// splitIndex is Flink's SPLIT_INDEX(s, sep, i): the i-th piece of s cut
// at sep, counting from 0; empty (Flink: NULL) when s has fewer pieces.
func splitIndex(s []byte, sep byte, i int) []byte {
	for range i {
		j := bytes.IndexByte(s, sep)
		if j < 0 {
			return nil
		}
		s = s[j+1:]
	}
	if j := bytes.IndexByte(s, sep); j >= 0 {
		return s[:j]
	}
	return s
}

// AppendQ10 appends the q10 output of b.
func AppendQ10(dst []byte, b Bid) []byte {
	dst = appendFields(dst, b.Auction, b.Bidder, b.Price, b.DateTime)
	t := time.UnixMilli(b.DateTime).UTC()
	return t.AppendFormat(append(t.AppendFormat(append(dst, ','), "2006-01-02"), ','), "15:04")
}

// SideInputKeys is the number of keys of q13's side input, 0 to
// SideInputKeys-1.
const SideInputKeys = 10_000

// SideValue returns q13's side input value of key: "side-" and five
// letters drawn from the key.
func SideValue(key int64) string {
	return string(appendLetters([]byte("side-"), uint64(key)*0x9E3779B97F4A7C15, 5))
}

// AppendSideInput appends q13's side input file: a line "key,value" for
// every key.
func AppendSideInput(dst []byte) []byte {
	for k := range int64(SideInputKeys) {
		dst = append(append(appendFields(dst, k), ','), SideValue(k)...)
		dst = append(dst, '\n')
	}
	return dst
}

// ParseSideInput parses a side input file of AppendSideInput's form into
// its values by key.
func ParseSideInput(file []byte) (map[int64][]byte, error) {
	side := make(map[int64][]byte, SideInputKeys)
	for n, line := range bytes.Split(bytes.TrimSuffix(file, []byte{'\n'}), []byte{'\n'}) {
		k, v, ok := bytes.Cut(line, []byte{','})
		key, good := parseInt(k)
		if !ok || !good {
			return nil, fmt.Errorf("nexmark: side input line %d: want key,value, got %q", n+1, line)
		}
		side[key] = v
	}
	return side, nil
}

// AppendQ13 appends the q13 output of b, whose side input value is value.
func AppendQ13(dst []byte, b Bid, value []byte) []byte {
	return append(append(appendFields(dst, b.Auction, b.Bidder, b.Price, b.DateTime), ','), value...)
}

// AppendStateless appends the output of the stateless query q (q0, q1,
// q2, q10, q13, q14, q21, q22) of event v; ok is false when q outputs nothing for
// it. It is the reference the runner compares the systems' outputs with.
func AppendStateless(dst []byte, q string, v []byte) (out []byte, ok bool, err error) {
	if q == "q0" {
		return append(dst, v...), true, nil
	}
	b, isBid, err := ParseBidDetail(v)
	if err != nil || !isBid {
		return dst, false, err
	}
	switch q {
	case "q1":
		return AppendQ1(dst, b.Bid), true, nil
	case "q2":
		if Q2Selects(b.Bid) {
			return AppendQ2(dst, b.Bid), true, nil
		}
		return dst, false, nil
	case "q10":
		return AppendQ10(dst, b.Bid), true, nil
	case "q13":
		return AppendQ13(dst, b.Bid, []byte(SideValue(b.Auction%SideInputKeys))), true, nil
	case "q14":
		if Q14Selects(b.Bid) {
			return AppendQ14(dst, b), true, nil
		}
		return dst, false, nil
	case "q21":
		if id, ok := Q21ChannelID(b); ok {
			return AppendQ21(dst, b, id), true, nil
		}
		return dst, false, nil
	case "q22":
		return AppendQ22(dst, b), true, nil
	}
	return dst, false, fmt.Errorf("nexmark: %q is not a stateless query", q)
}

// Digest is an order-free fingerprint of a multiset of output values:
// their number and the sum of their 64-bit FNV-1a hashes. The runner
// compares a system's with the reference's: equal digests mean the same
// outputs but with a chance of 2^-64 per difference.
type Digest struct {
	N, Sum uint64
}

// Add adds v to the multiset.
func (d *Digest) Add(v []byte) {
	d.N++
	d.Sum += Hash(v)
}

// Hash is the 64-bit FNV-1a hash of v, which a Digest sums.
func Hash(v []byte) uint64 {
	h := uint64(14695981039346656037)
	for _, c := range v {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return h
}

// ReferenceDigest returns the digest of the outputs of the per-event
// query q (see PerEvent) over events [from, to) of the stream seeded by
// seed; count's running counts start at from, and q3 joins only the
// persons and auctions among them.
func ReferenceDigest(q string, seed, from, to uint64) (Digest, error) {
	var d Digest
	var ev, out []byte
	counts := map[int64]int64{}
	local := localItems{sellers: map[int64]Person{}}
	expanded := expandedBids{auctions: map[int64]Auction{}}
	for i := from; i < to; i++ {
		if q == "q20" {
			if KindOf(i) == PersonKind {
				continue
			}
			ev = Append(ev[:0], seed, i)
			if o, ok, err := expanded.add(ev); err != nil {
				return d, err
			} else if ok {
				d.Add(o)
			}
			continue
		}
		if q == "q3" {
			if KindOf(i) == BidKind {
				continue
			}
			ev = Append(ev[:0], seed, i)
			if o, ok, err := local.add(ev); err != nil {
				return d, err
			} else if ok {
				d.Add(o)
			}
			continue
		}
		ev = Append(ev[:0], seed, i)
		if q == "count" {
			if b, ok, err := ParseBid(ev); err != nil {
				return d, err
			} else if ok {
				counts[b.Auction]++
				d.Add(AppendCount(out[:0], b.Auction, counts[b.Auction]))
			}
			continue
		}
		o, ok, err := AppendStateless(out[:0], q, ev)
		if err != nil {
			return d, err
		}
		if out = o; ok {
			d.Add(out)
		}
	}
	return d, nil
}
