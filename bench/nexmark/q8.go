package nexmark

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
)

// q8 (monitor new users), of Flink's Nexmark suite, joins persons and
// auctions in tumbling windows of Q8Size of event time: every person who
// joined (a person event) and sold (the seller of an auction event) in
// the same window, once per window, as "id,name,windowStart" (windowStart
// in Unix ms). Flink's query groups the persons and the sellers of each
// window and joins the groups, so a person selling twice in a window is
// output once. Its checked outputs are those of the windows ending at or
// before Cutoff.
const Q8Size = 10_000

// Person is the part of a person event the queries read (q3, q8).
type Person struct {
	ID                int64
	Name, City, State []byte // subslices of the parsed value
	DateTime          int64
}

// Auction is the part of an auction event the queries read (q3, q8, q9,
// q20).
type Auction struct {
	ID, Seller, Category, DateTime, Expires int64
	// Fields are its fields from itemName to category, as in the event:
	// "itemName,description,initialBid,reserve,dateTime,expires,seller,category",
	// a subslice of the parsed value.
	Fields []byte
}

// ParsePersonOrAuction parses v: a person (kind PersonKind), an auction
// (AuctionKind), or a bid (BidKind, nothing parsed).
func ParsePersonOrAuction(v []byte) (k Kind, p Person, a Auction, err error) {
	if len(v) < 2 || v[1] != ',' {
		return 0, p, a, fmt.Errorf("%w: %q", ErrMalformed, v)
	}
	k = Kind(v[0])
	if k == BidKind { // most events: nothing to split
		return k, p, a, nil
	}
	fields := bytes.Split(v[2:], []byte{','})
	switch k {
	case PersonKind: // id,name,email,creditCard,city,state,dateTime,extra
		if len(fields) != 8 {
			return k, p, a, fmt.Errorf("%w: a person of %d fields: %q", ErrMalformed, len(fields), v)
		}
		p.Name, p.City, p.State = fields[1], fields[4], fields[5]
		var ok1, ok2 bool
		p.ID, ok1 = parseInt(fields[0])
		p.DateTime, ok2 = parseInt(fields[6])
		if !ok1 || !ok2 {
			return k, p, a, fmt.Errorf("%w: %q", ErrMalformed, v)
		}
	case AuctionKind: // id,itemName,description,initialBid,reserve,dateTime,expires,seller,category,extra
		if len(fields) != 10 {
			return k, p, a, fmt.Errorf("%w: an auction of %d fields: %q", ErrMalformed, len(fields), v)
		}
		var ok1, ok2, ok3, ok4, ok5 bool
		a.ID, ok1 = parseInt(fields[0])
		a.DateTime, ok2 = parseInt(fields[5])
		a.Expires, ok5 = parseInt(fields[6])
		a.Seller, ok3 = parseInt(fields[7])
		a.Category, ok4 = parseInt(fields[8])
		a.Fields = v[2+len(fields[0])+1 : len(v)-len(fields[9])-1]
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 {
			return k, p, a, fmt.Errorf("%w: %q", ErrMalformed, v)
		}
	default:
		return k, p, a, fmt.Errorf("%w: kind %q: %q", ErrMalformed, v[0], v)
	}
	return k, p, a, nil
}

// AppendQ8 appends the q8 output of person id, named name, in the window
// starting at start.
func AppendQ8(dst []byte, id int64, name []byte, start int64) []byte {
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(append(append(dst, ','), name...), ',')
	return strconv.AppendInt(dst, start, 10)
}

// NewUsers is the reference q8 over events [from, to) of the stream
// seeded by seed, which come in non-decreasing dateTime order: it calls
// emit with every output of the windows ending at or before upTo.
func NewUsers(seed, from, to uint64, upTo int64, emit func(v []byte)) error {
	var (
		start   int64 = math.MinInt64
		persons       = map[int64][]byte{} // of the window: id → name
		sellers       = map[int64]bool{}
		buf, ev []byte
	)
	flush := func() {
		if start+Q8Size <= upTo {
			for _, id := range slices.Sorted(maps.Keys(persons)) {
				if sellers[id] {
					buf = AppendQ8(buf[:0], id, persons[id], start)
					emit(buf)
				}
			}
		}
		clear(persons)
		clear(sellers)
	}
	for i := from; i < to; i++ {
		if KindOf(i) == BidKind {
			continue
		}
		ev = Append(ev[:0], seed, i)
		k, p, a, err := ParsePersonOrAuction(ev)
		if err != nil {
			return err
		}
		t := p.DateTime
		if k == AuctionKind {
			t = a.DateTime
		}
		if w := alignDown(t, Q8Size); w != start {
			if w < start {
				return fmt.Errorf("nexmark: event %d at %d after one at %d or later: events must come in event-time order", i, t, start)
			}
			flush()
			start = w
		}
		if k == PersonKind {
			persons[p.ID] = slices.Clone(p.Name)
		} else {
			sellers[a.Seller] = true
		}
	}
	flush()
	return nil
}
