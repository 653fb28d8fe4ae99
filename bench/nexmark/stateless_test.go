package nexmark

import (
	"strings"
	"testing"
)

func TestStatelessQueries(t *testing.T) {
	const bid = "B,1107,1001,1234567,Google,https://www.nexmark.com/abcde/fghcc/klmno/item.htm?query=1&channel_id=0,1767225600004,"
	for _, c := range []struct {
		q, v, want string
		ok         bool
	}{
		{"q14", bid, "", false}, // 1,120,986 euro cents: above Q14MaxEuro
		{"q14", strings.Replace(bid, "1234567", "123456", 1), "1107,1001,112098,nightTime,1767225600004,5", true}, // the c of .com, abcde, fghcc (2) and channel_id
		{"q21", bid, "1107,1001,1234567,Google,1", true},
		{"q21", strings.Replace(bid, "Google", "channel-77", 1), "1107,1001,1234567,channel-77,0", true},
		{"q21", strings.Replace(bid, "Google", "BAIDU", 1), "1107,1001,1234567,BAIDU,3", true},
		{"q21", strings.NewReplacer("Google", "x", "&channel_id=0", "").Replace(bid), "", false},
		{"q22", bid, "1107,1001,1234567,Google,abcde,fghcc,klmno", true},
		{"q22", strings.Replace(bid, "abcde/fghcc/klmno/", "", 1), "1107,1001,1234567,Google,item.htm?query=1&channel_id=0,,", true},
		{"q14", "P,1000,Kate Smith,x@example.com,1 2 3 4,Bend,OR,1,pad", "", false},
		{"q10", bid, "1107,1001,1234567,1767225600004,2026-01-01,00:00", true},
		{"q10", strings.Replace(bid, "1767225600004", "1767279599999", 1), "1107,1001,1234567,1767279599999,2026-01-01,14:59", true},
		{"q13", bid, "1107,1001,1234567,1767225600004," + SideValue(1107), true},
		{"q13", strings.Replace(bid, "B,1107", "B,21107", 1), "21107,1001,1234567,1767225600004," + SideValue(1107), true},
		{"q13", "A,1003,item-x,description of item y,100,200,1767225600001,1767225610001,1002,12,pad", "", false},
	} {
		out, ok, err := AppendStateless(nil, c.q, []byte(c.v))
		if err != nil || ok != c.ok || string(out) != c.want {
			t.Errorf("%s of %q = %q, %v, %v; want %q, %v", c.q, c.v, out, ok, err, c.want, c.ok)
		}
	}
	for h, want := range map[int64]string{0: "nightTime", 6: "nightTime", 7: "otherTime", 8: "dayTime", 18: "dayTime", 19: "otherTime", 20: "nightTime", 23: "nightTime"} {
		if got := BidTimeType(BaseTime + h*3_600_000); got != want {
			t.Errorf("BidTimeType at %d h = %s, want %s", h, got, want)
		}
	}
	if v, ok := urlParam([]byte("channel_id=5&x=1"), "channel_id"); !ok || string(v) != "5" {
		t.Errorf("urlParam at the start: %q %v", v, ok)
	}
	if _, ok := urlParam([]byte("a=1&xchannel_id=5"), "channel_id"); ok {
		t.Error("urlParam matched inside another parameter's name")
	}
}

// TestGeneratedBidsForStatelessQueries checks the generator's bids
// against what q14, q21 and q22 read: three url directories, a channel
// id for every bid, and a share of q14's bids near the documented 37%.
func TestGeneratedBidsForStatelessQueries(t *testing.T) {
	var bids, q14 int
	for i := range uint64(20_000) {
		v := Append(nil, 5, i)
		b, ok, err := ParseBidDetail(v)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue
		}
		bids++
		if Q14Selects(b.Bid) {
			q14++
		}
		if _, ok := Q21ChannelID(b); !ok {
			t.Fatalf("bid %q has no q21 channel id", v)
		}
		if out := AppendQ22(nil, b); strings.HasSuffix(string(out), ",") || strings.Count(string(out), ",") != 6 {
			t.Fatalf("q22 of %q = %q: want three directories", v, out)
		}
	}
	if share := float64(q14) / float64(bids); share < 0.30 || share > 0.45 {
		t.Errorf("q14 selects %.2f of the bids, want about 0.37", share)
	}
	d, err := ReferenceDigest("q21", 5, 0, 20_000)
	if err != nil || d.N != uint64(bids) {
		t.Errorf("ReferenceDigest(q21) = %+v, %v; want %d outputs", d, err, bids)
	}
	var again Digest
	for i := range uint64(20_000) {
		if out, ok, _ := AppendStateless(nil, "q21", Append(nil, 5, 19_999-i)); ok {
			again.Add(out)
		}
	}
	if again != d {
		t.Errorf("the digest depends on the order: %+v then %+v", d, again)
	}
}

func TestSideInput(t *testing.T) {
	side, err := ParseSideInput(AppendSideInput(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(side) != SideInputKeys {
		t.Fatalf("%d keys, want %d", len(side), SideInputKeys)
	}
	values := map[string]bool{}
	for k, v := range side {
		if string(v) != SideValue(k) {
			t.Fatalf("key %d: %q, want %q", k, v, SideValue(k))
		}
		values[string(v)] = true
	}
	if len(values) < SideInputKeys/2 {
		t.Errorf("only %d distinct values of %d keys", len(values), SideInputKeys)
	}
	for _, bad := range []string{"1\n", "x,y\n", "1,a\n\n2,b\n"} {
		if _, err := ParseSideInput([]byte(bad)); err == nil {
			t.Errorf("ParseSideInput(%q): no error", bad)
		}
	}
}
