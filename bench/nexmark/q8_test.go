package nexmark

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestParsePersonOrAuction(t *testing.T) {
	k, p, _, err := ParsePersonOrAuction([]byte("P,1007,Kate Smith,abc@example.com,1 2 3 4,Bend,OR,1767225600000,pad"))
	if err != nil || k != PersonKind || p.ID != 1007 || string(p.Name) != "Kate Smith" || string(p.City) != "Bend" || string(p.State) != "OR" || p.DateTime != 1767225600000 {
		t.Errorf("person: %c %+v %v", k, p, err)
	}
	k, _, a, err := ParsePersonOrAuction([]byte("A,1003,item-x,description of item y,100,200,1767225600001,1767225610001,1002,12,pad"))
	if err != nil || k != AuctionKind || string(a.Fields) != "item-x,description of item y,100,200,1767225600001,1767225610001,1002,12" {
		t.Errorf("auction fields: %q", a.Fields)
	}
	if a.Fields = nil; !reflect.DeepEqual(a, Auction{ID: 1003, Seller: 1002, Category: 12, DateTime: 1767225600001, Expires: 1767225610001}) {
		t.Errorf("auction: %c %+v %v", k, a, err)
	}
	for _, bad := range []string{"P,1,x", "A,1,2,3", "P,x,n,e,c,c,s,1,", "Z,1", ""} {
		if _, _, _, err := ParsePersonOrAuction([]byte(bad)); err == nil {
			t.Errorf("ParsePersonOrAuction(%q): no error", bad)
		}
	}
}

// TestNewUsers checks q8's reference on the generator's stream against a
// plain count: every output is a person of its window who sold in it.
func TestNewUsers(t *testing.T) {
	const n = 300_000
	joined := map[[2]int64]string{} // window, id → name
	sold := map[[2]int64]bool{}
	for i := range uint64(n) {
		k, p, a, err := ParsePersonOrAuction(Append(nil, 1, i))
		if err != nil {
			t.Fatal(err)
		}
		switch k {
		case PersonKind:
			joined[[2]int64{alignDown(p.DateTime, Q8Size), p.ID}] = string(p.Name)
		case AuctionKind:
			sold[[2]int64{alignDown(a.DateTime, Q8Size), a.Seller}] = true
		}
	}
	want := map[string]bool{}
	for wid, name := range joined {
		if sold[wid] && wid[0]+Q8Size <= Cutoff(n) {
			want[string(AppendQ8(nil, wid[1], []byte(name), wid[0]))] = true
		}
	}
	got := map[string]bool{}
	err := CheckedOutputs("q8", 1, 0, n, func(v []byte) {
		if got[string(v)] {
			t.Errorf("output %s twice", v)
		}
		got[string(v)] = true
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(want) == 0 || len(got) != len(want) {
		t.Fatalf("%d outputs, want %d (> 0)", len(got), len(want))
	}
	for v := range want {
		if !got[v] {
			t.Errorf("missing %s", v)
		}
		if end, err := OutputEnd("q8", []byte(v)); err != nil || !strings.HasSuffix(v, ","+itoa(end-Q8Size)) {
			t.Errorf("OutputEnd(q8, %s) = %d, %v", v, end, err)
		}
	}
}

func itoa(v int64) string { return string(appendFields(nil, v)) }

// TestLocalItems checks q3's reference against a count of its own: every
// selected auction whose seller is a selected person has one output, with
// the seller's name, city and state.
func TestLocalItems(t *testing.T) {
	const n = 300_000
	persons := map[int64]string{} // id → "name,city,state" of the selected ones
	want := Digest{}
	for i := range uint64(n) {
		k, p, a, err := ParsePersonOrAuction(Append(nil, 9, i))
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case k == PersonKind && Q3SelectsPerson(p):
			persons[p.ID] = string(p.Name) + "," + string(p.City) + "," + string(p.State)
		case k == AuctionKind && a.Category == Q3Category:
			if s, ok := persons[a.Seller]; ok {
				want.Add([]byte(s + "," + strconv.FormatInt(a.ID, 10)))
			}
		}
	}
	got, err := ReferenceDigest("q3", 9, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	// 6,000 persons, half of them in the three states; 18,000 auctions, a
	// fifth of them of the category.
	if got != want || got.N < 1_500 || got.N > 2_100 {
		t.Errorf("q3 reference: %+v, want %+v (about 1,800 outputs)", got, want)
	}
}

// TestJoinedAuctions checks q20's and q9's references against counts of
// their own: q20 outputs every bid on an auction of its category, q9 the
// highest price of each auction's bids in its lifetime.
func TestJoinedAuctions(t *testing.T) {
	const n = 200_000
	auctions := map[int64]Auction{}
	var q20 uint64
	highest := map[int64]int64{}
	for i := range uint64(n) {
		v := Append(nil, 4, i)
		if KindOf(i) == BidKind {
			b, _, err := ParseBid(v)
			if err != nil {
				t.Fatal(err)
			}
			a, ok := auctions[b.Auction]
			if !ok {
				t.Fatalf("bid %d on auction %d before it", i, b.Auction)
			}
			if a.Category == Q20Category {
				q20++
			}
			if b.DateTime >= a.DateTime && b.DateTime <= a.Expires {
				highest[a.ID] = max(highest[a.ID], b.Price)
			}
			continue
		}
		if k, _, a, err := ParsePersonOrAuction(v); err != nil {
			t.Fatal(err)
		} else if k == AuctionKind {
			auctions[a.ID] = a
		}
	}
	if d, err := ReferenceDigest("q20", 4, 0, n); err != nil || d.N != q20 || q20 == 0 {
		t.Errorf("q20: %d outputs (%v), want %d", d.N, err, q20)
	}
	table, err := ReferenceTable("q9", 4, 0, n)
	if err != nil {
		t.Fatal(err)
	}
	if len(table) != len(highest) {
		t.Errorf("q9: %d rows, want %d", len(table), len(highest))
	}
	type sum struct{ sum, n int64 }
	categories := map[int64]sum{}
	for id, price := range highest {
		c := categories[auctions[id].Category]
		categories[auctions[id].Category] = sum{c.sum + price, c.n + 1}
		row := strings.Split(table[strconv.FormatInt(id, 10)], ",")
		if len(row) != 12 || row[0] != strconv.FormatInt(id, 10) || row[10] != strconv.FormatInt(price, 10) {
			t.Fatalf("q9 row of %d: %q, want the price %d", id, row, price)
		}
	}
	q4, err := ReferenceTable("q4", 4, 0, n)
	if err != nil || len(q4) != len(categories) {
		t.Fatalf("q4: %v, %v; want %d categories", q4, err, len(categories))
	}
	for c, s := range categories {
		if got, want := q4[strconv.FormatInt(c, 10)], fmt.Sprintf("%d,%d,%d", c, s.sum/s.n, s.n); got != want {
			t.Errorf("q4 row %q, want %q", got, want)
		}
	}
}
