package main

import (
	"testing"
	"time"
)

func TestGaps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := func(sec float64) time.Time { return t0.Add(time.Duration(sec * float64(time.Second))) }
	a := newArrivals()
	for _, x := range []struct {
		p   int32
		sec float64
	}{{0, 1}, {0, 2}, {0, 3}, {0, 9}, {0, 10}, {1, 1}, {1, 2}, {1, 2}, {1, 4}, {1, 5}, {1, 1.5}} {
		a.add(x.p, s(x.sec)) // the repeated and the earlier times are dropped
	}
	at := a.snapshot()
	if len(at[1]) != 4 {
		t.Fatalf("partition 1 arrivals %v, want 4 (a repeat and an earlier time dropped)", at[1])
	}
	if got, ok := allAfter(at, 2, s(3)); !ok || !got.Equal(s(9)) {
		t.Errorf("every partition had output after 3s at %v (%v), want 9s", got.Sub(t0), ok)
	}
	if _, ok := allAfter(at, 2, s(5)); ok {
		t.Errorf("partition 1 has no output after 5s, yet allAfter says all had")
	}
	if _, ok := allAfter(at, 3, s(0)); ok {
		t.Errorf("partition 2 never had output, yet allAfter says all had")
	}
	if got := longestGap(at, 2, s(0.5), s(10)); got != 6*time.Second {
		t.Errorf("longest gap in [0.5s, 10s] %v, want 6s (partition 0, 3s to 9s)", got)
	}
	if got := longestGap(at, 2, s(0.5), s(4.5)); got != 2*time.Second {
		t.Errorf("longest gap in [0.5s, 4.5s] %v, want 2s", got)
	}
}
