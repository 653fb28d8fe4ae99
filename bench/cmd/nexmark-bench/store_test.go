package main

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestStoreMergesRuns builds a table over three runs: each replaces the
// rows of the queries and systems it measured, keeps the others, and a
// run whose rows were all replaced is no longer listed.
func TestStoreMergesRuns(t *testing.T) {
	r := func(q, sys string, rate float64) row {
		return newRow(result{query: q, system: sys, tput: throughput{rate: rate, perCPU: rate / 2, rss: 100 << 20}}, false, 0)
	}
	var s store
	s.add(runInfo{Commit: "a"}, []row{r("q1", "exactly", 1000), r("q1", "flink", 500)})
	s.add(runInfo{Commit: "b"}, []row{r("q8", "exactly", 3000), r("q0", "exactly", 2000)})
	s.add(runInfo{Commit: "c"}, []row{r("q1", "exactly", 1100), r("q1", "flink", 400), r("q0", "kstreams", 10)})

	type cell struct {
		query, system, commit string
		rate                  float64
	}
	var got []cell
	for _, w := range s.Rows {
		got = append(got, cell{w.Query, w.System, s.Runs[w.Run].Commit, w.RateValue})
	}
	want := []cell{
		{"q0", "exactly", "b", 2000}, {"q0", "kstreams", "c", 10},
		{"q1", "exactly", "c", 1100}, {"q1", "flink", "c", 400},
		{"q8", "exactly", "b", 3000},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rows %v, want %v", got, want)
	}
	if len(s.Runs) != 2 || s.Runs[0].Commit != "b" || s.Runs[1].Commit != "c" {
		t.Errorf("runs %+v, want b and c (a's rows were all replaced)", s.Runs)
	}
	md := s.markdown()
	for _, line := range []string{
		"| q1 | **exactly / Flink** | 2.75× | 2.75× | — | — | 1.00× | — | | |",
		"| q0 | **exactly / Kafka Streams** | 200.00× |",
		"1. , commit b, backlog of 0 events",
	} {
		if !strings.Contains(md, line) {
			t.Errorf("the table lacks %q:\n%s", line, md)
		}
	}
}

// TestStoreRoundTrip saves and loads a store, and refuses one whose
// rows name a run it does not hold.
func TestStoreRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	if s, err := loadStore(path); err != nil || len(s.Rows) != 0 {
		t.Fatalf("loadStore of a missing file = %v, %v; want an empty store", s, err)
	}
	var s store
	lat := latency{p50: 500 * time.Millisecond, p99: time.Second, recovery: 2 * time.Second}
	s.add(runInfo{Commit: "a", Events: 10}, []row{newRow(result{query: "q3", system: "exactly", lat: lat}, true, 3)})
	if err := s.save(path); err != nil {
		t.Fatal(err)
	}
	back, err := loadStore(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*back, s) {
		t.Errorf("loaded %+v, want %+v", *back, s)
	}
	back.Rows[0].Run = 5
	if err := back.save(path); err != nil {
		t.Fatal(err)
	}
	if _, err := loadStore(path); err == nil || !strings.Contains(err.Error(), "names run 5 of 1") {
		t.Errorf("loadStore of a row naming a missing run: %v", err)
	}
}

func TestOneMinuteLoad(t *testing.T) {
	if v, ok := oneMinuteLoad("1.52 0.90 0.40"); !ok || v != 1.52 {
		t.Errorf("oneMinuteLoad = %v, %v", v, ok)
	}
	if _, ok := oneMinuteLoad("unknown"); ok {
		t.Error("oneMinuteLoad(unknown) is ok")
	}
}
