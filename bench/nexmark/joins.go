package nexmark

import "slices"

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
