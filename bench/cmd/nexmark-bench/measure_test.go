package main

import (
	"testing"
	"time"

	"github.com/exactlyonce/exactly/bench/nexmark"
)

func TestTally(t *testing.T) {
	want := map[string]uint64{"a": 1, "b": 2, "c": 1}
	for _, c := range []struct {
		got                        map[string]uint64
		duplicates, missing, wrong uint64
	}{
		{map[string]uint64{"a": 1, "b": 2, "c": 1}, 0, 0, 0},
		{map[string]uint64{"a": 2, "b": 2}, 1, 1, 0}, // as many outputs as expected, but not the expected ones
		{map[string]uint64{"a": 1, "b": 1, "c": 1, "x": 1}, 0, 1, 1},
		{map[string]uint64{}, 0, 4, 0},
	} {
		d, m, w := tally(c.got, want)
		if d != c.duplicates || m != c.missing || w != c.wrong {
			t.Errorf("tally(%v) = +%d, -%d, %d wrong; want +%d, -%d, %d wrong", c.got, d, m, w, c.duplicates, c.missing, c.wrong)
		}
	}
}

func TestVisibleEnd(t *testing.T) {
	outs := []windowOutput{{0, 0, 10, time.Time{}}, {1, 0, 20, time.Time{}}, {0, 1, 30, time.Time{}}, {1, 5, 40, time.Time{}}}
	for _, c := range []struct {
		ends [partitions]int64
		want int64
	}{
		{[partitions]int64{}, 0},
		{[partitions]int64{1, 0}, 10},
		{[partitions]int64{2, 1}, 30},
		{[partitions]int64{2, 6}, 40},
	} {
		if got := visibleEnd(outs, c.ends); got != c.want {
			t.Errorf("visibleEnd below %v = %d, want %d", c.ends, got, c.want)
		}
	}
}

func TestFirstBeyond(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	c := newCollector("q1", 100, reference{})
	add := func(partition int32, offset int64, s int) {
		c.add(seen{at: at(s), partition: partition, offset: offset}, nil, []byte("1,2"))
	}
	add(0, 0, 1)
	add(1, 0, 2)
	c.watchBeyond([partitions]int64{1, 1})
	if got, ok := c.firstBeyond(); ok {
		t.Fatalf("firstBeyond before any output beyond the ends = %v", got)
	}
	add(1, 5, 4) // partition 1's offset 5 comes before partition 0's offset 1
	add(0, 1, 5)
	if got, ok := c.firstBeyond(); !ok || !got.Equal(at(4)) {
		t.Errorf("firstBeyond = %v, %v; want %v", got, ok, at(4))
	}
	if got, ok := c.firstBeyond(); ok {
		t.Errorf("firstBeyond once found again = %v: the watch should have ended", got)
	}
	add(1, 6, 6)
	if got, ok := c.firstBeyond(); ok {
		t.Errorf("firstBeyond with no watch = %v", got)
	}
	c.watchBeyond([partitions]int64{2, 6}) // partition 1's offset 6 is already beyond
	if _, ok := c.firstBeyond(); !ok {
		t.Error("an output beyond the ends received before the watch did not count")
	}
}

// TestDigestCheck checks a per-event query's outputs by digest: as many
// outputs as expected but one value changed is reported as differing.
func TestDigestCheck(t *testing.T) {
	var ref nexmark.Digest
	for _, v := range []string{"1,2", "3,4", "5,6"} {
		ref.Add([]byte(v))
	}
	for _, c := range []struct {
		got                 []string
		duplicates, missing uint64
		differ              bool
	}{
		{[]string{"5,6", "1,2", "3,4"}, 0, 0, false},
		{[]string{"1,2", "3,4", "5,7"}, 0, 0, true},
		{[]string{"1,2", "3,4"}, 0, 1, false},
		{[]string{"1,2", "3,4", "5,6", "5,6"}, 1, 0, false},
	} {
		col := newCollector("q1", 100, reference{})
		for i, v := range c.got {
			col.add(seen{partition: 0, offset: int64(i)}, nil, []byte(v))
		}
		d, m, w, differ := col.check(3, reference{digest: ref})
		if d != c.duplicates || m != c.missing || w != 0 || differ != c.differ {
			t.Errorf("check(%v) = +%d -%d %d wrong, differ %v; want +%d -%d, differ %v", c.got, d, m, w, differ, c.duplicates, c.missing, c.differ)
		}
	}
}

// TestTableCheck checks an updating query's outputs: the last value of
// each key makes the table, a null value deletes a row, and the run is
// done when the table is the reference's.
func TestTableCheck(t *testing.T) {
	want := tableReference(map[string]string{"1,2": "1003,1001,150,G,u,1767225600004", "1,3": "1003,1001,90,G,u,1767225601000"})
	type out struct{ key, value string } // value "": a null value
	for _, c := range []struct {
		outs           []out
		done           bool
		missing, wrong uint64
	}{
		{[]out{{"1,2", "1003,1001,150,G,u,1767225600004"}, {"1,3", "1003,1001,90,G,u,1767225601000"}}, true, 0, 0},
		{[]out{{"1,2", "1003,1001,1,G,u,1767225600000"}, {"1,3", "1003,1001,90,G,u,1767225601000"}, {"1,2", "1003,1001,150,G,u,1767225600004"}}, true, 0, 0},
		{[]out{{"1,2", "1003,1001,150,G,u,1767225600004"}}, false, 1, 0},
		{[]out{{"1,2", "1003,1001,150,G,u,1767225600004"}, {"1,3", "1003,1001,91,G,u,1767225601000"}}, false, 0, 1},
		{[]out{{"1,2", "1003,1001,150,G,u,1767225600004"}, {"1,3", "1003,1001,90,G,u,1767225601000"}, {"9,9", "1,1,1,G,u,1767225600000"}}, false, 0, 1},
		{[]out{{"9,9", "1,1,1,G,u,1767225600000"}, {"1,2", "1003,1001,150,G,u,1767225600004"}, {"1,3", "1003,1001,90,G,u,1767225601000"}, {"9,9", ""}}, true, 0, 0},
	} {
		col := newCollector("q18", 100, want)
		for i, o := range c.outs {
			var v []byte
			if o.value != "" {
				v = []byte(o.value)
			}
			col.add(seen{partition: 0, offset: int64(i)}, []byte(o.key), v)
		}
		done, _, err := col.done(2, [partitions]int64{int64(len(c.outs)) + 1, 1, 1, 1})
		d, m, w, _ := col.check(2, want)
		if err != nil || done != c.done || d != 0 || m != c.missing || w != c.wrong {
			t.Errorf("%v: done %v (err %v), +%d -%d %d wrong; want done %v, -%d %d wrong", c.outs, done, err, d, m, w, c.done, c.missing, c.wrong)
		}
		if got := col.eventsBehind(); c.done && got != nexmark.EventsBehind("q18", 1767225601000) {
			t.Errorf("%v: %v events behind the table", c.outs, got)
		}
	}
}

// TestSumCheck checks q12's outputs: each window's count of a bidder is
// added to the bidder's sum, whatever the row's key, and the run is done
// when the sums are the reference's; a window counted twice makes a
// wrong sum.
func TestSumCheck(t *testing.T) {
	want := tableReference(map[string]string{"1001": "1001,5", "1002": "1002,1"})
	for _, c := range []struct {
		rows           []string
		done           bool
		missing, wrong uint64
	}{
		{[]string{"1001,3,0,10000", "1002,1,0,10000", "1001,2,10000,20000"}, true, 0, 0},
		{[]string{"1001,5,0,10000"}, false, 1, 0},
		{[]string{"1001,3,0,10000", "1002,1,0,10000", "1001,2,10000,20000", "1001,2,10000,20000"}, false, 0, 1},
		{[]string{"1001,5,0,10000", "1002,1,0,10000", "1003,1,0,10000"}, false, 0, 1},
	} {
		col := newCollector("q12", 100, want)
		for i, r := range c.rows {
			col.add(seen{partition: 0, offset: int64(i)}, []byte("k"), []byte(r))
		}
		done, _, err := col.done(2, [partitions]int64{int64(len(c.rows)) + 1, 1, 1, 1})
		d, m, w, _ := col.check(2, want)
		if err != nil || done != c.done || d != 0 || m != c.missing || w != c.wrong {
			t.Errorf("%v: done %v (err %v), +%d -%d %d wrong; want done %v, -%d %d wrong", c.rows, done, err, d, m, w, c.done, c.missing, c.wrong)
		}
		if got := col.eventsBehind(); c.done && got != nexmark.EventsBehind("q12", 6) {
			t.Errorf("%v: %v events behind the sums", c.rows, got)
		}
	}
	col := newCollector("q12", 100, want)
	col.add(seen{}, nil, []byte("1001,x,0,1"))
	if _, _, err := col.done(2, [partitions]int64{1, 1, 1, 1}); err == nil {
		t.Error("a row that does not parse: no error")
	}
}
