package nexmark

import (
	"bytes"
	"strings"
	"testing"
)

func TestAppendIsDeterministic(t *testing.T) {
	for i := range uint64(500) {
		a, b := Append(nil, 7, i), Append(nil, 7, i)
		if !bytes.Equal(a, b) {
			t.Fatalf("event %d: %q then %q", i, a, b)
		}
	}
	if bytes.Equal(Append(nil, 1, 10), Append(nil, 2, 10)) {
		t.Fatal("seeds 1 and 2 make the same bid 10")
	}
}

func TestProportionsAndFormat(t *testing.T) {
	counts := map[Kind]int{}
	fields := map[Kind]int{PersonKind: 9, AuctionKind: 11, BidKind: 8}
	for i := range uint64(5000) {
		v := Append(nil, 1, i)
		k := Kind(v[0])
		if k != KindOf(i) {
			t.Fatalf("event %d is %q, KindOf says %q", i, k, KindOf(i))
		}
		counts[k]++
		if n := len(strings.Split(string(v), ",")); n != fields[k] {
			t.Fatalf("event %d %q has %d fields, want %d", i, v, n, fields[k])
		}
	}
	if counts[PersonKind] != 100 || counts[AuctionKind] != 300 || counts[BidKind] != 4600 {
		t.Fatalf("kinds of 5000 events: %v, want 100:300:4600", counts)
	}
}

func TestBidsGoToExistingAuctionsAndPersons(t *testing.T) {
	var maxAuction, maxPerson int64 = -1, -1
	for i := range uint64(20_000) {
		v := Append(nil, 3, i)
		switch KindOf(i) {
		case AuctionKind:
			maxAuction = max(maxAuction, lastAuctionID(i))
		case PersonKind:
			maxPerson = max(maxPerson, lastPersonID(i))
		case BidKind:
			b, ok, err := ParseBid(v)
			if err != nil || !ok {
				t.Fatalf("event %d %q: ok %v, err %v", i, v, ok, err)
			}
			if b.Auction < firstAuctionID || b.Auction > maxAuction || b.Bidder < firstPersonID || b.Bidder > maxPerson+1 {
				t.Fatalf("bid %d %+v: auctions so far [%d, %d], persons [%d, %d]", i, b, firstAuctionID, maxAuction, firstPersonID, maxPerson)
			}
			if b.Price < 100 || b.Price > 10_000_00 {
				t.Fatalf("bid %d price %d out of [100, 1000000]", i, b.Price)
			}
		}
	}
}

func TestQueries(t *testing.T) {
	b, ok, err := ParseBid([]byte("B,1107,1001,12345,Google,https://www.nexmark.com/abcde/item.htm?query=1&channel_id=0,1767225600004,"))
	if err != nil || !ok {
		t.Fatalf("ParseBid: ok %v, err %v", ok, err)
	}
	if got := string(AppendQ1(nil, b)); got != "1107,1001,11209,1767225600004" {
		t.Errorf("q1 = %q", got)
	}
	if !Q2Selects(b) || string(AppendQ2(nil, b)) != "1107,12345" { // 1107 = 9·123
		t.Errorf("q2 of auction 1107: selected %v, %q", Q2Selects(b), AppendQ2(nil, b))
	}
	if got := string(AppendCount(nil, 1107, 3)); got != "1107,3" {
		t.Errorf("count = %q", got)
	}
	if _, ok, err := ParseBid([]byte("P,1000,Kate Smith,x@example.com,1 2 3 4,Bend,OR,1,pad")); ok || err != nil {
		t.Errorf("ParseBid(person): ok %v, err %v", ok, err)
	}
	for _, bad := range []string{"", "B", "B,1,2", "B,x,2,3,c,u,4,", "X1,2", "B,-,2,3,c,u,4,", "B,1,,3,c,u,4,", "B,1,2,3,c,u,12345678901234567890,"} {
		if _, _, err := ParseBid([]byte(bad)); err == nil {
			t.Errorf("ParseBid(%q): no error", bad)
		}
	}
}

func TestExpected(t *testing.T) {
	const n = 10_000
	for q, want := range map[string]uint64{"q0": n, "q1": 9200, "count": 9200} {
		if got, err := Expected(q, 1, 0, n); err != nil || got != want {
			t.Errorf("Expected(%s) = %d, %v; want %d", q, got, err, want)
		}
	}
	var selected uint64
	var buf []byte
	for i := range uint64(n) {
		buf = Append(buf[:0], 1, i)
		if b, ok, _ := ParseBid(buf); ok && Q2Selects(b) {
			selected++
		}
	}
	if got, err := Expected("q2", 1, 0, n); err != nil || got != selected || got == 0 {
		t.Errorf("Expected(q2) = %d, %v; want %d (> 0)", got, err, selected)
	}
	if _, err := Expected("q23", 1, 0, 1); err == nil {
		t.Error("Expected(q23): no error")
	}
}

// BenchmarkParseBid parses generated bids.
func BenchmarkParseBid(b *testing.B) {
	var vs [][]byte
	for i := uint64(0); len(vs) < 1000; i++ {
		if KindOf(i) == BidKind {
			vs = append(vs, Append(nil, 1, i))
		}
	}
	b.ResetTimer()
	for i := range b.N {
		if _, _, err := ParseBid(vs[i%len(vs)]); err != nil {
			b.Fatal(err)
		}
	}
}
