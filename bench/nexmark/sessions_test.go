package nexmark

import (
	"slices"
	"strings"
	"testing"
)

func TestUserSessions(t *testing.T) {
	bids := []Bid{
		{Bidder: 1, DateTime: 0},
		{Bidder: 2, DateTime: 1_000},
		{Bidder: 1, DateTime: 9_999},  // less than the gap after 0: the same session
		{Bidder: 1, DateTime: 19_999}, // exactly the gap after 9,999: a new session
		{Bidder: 2, DateTime: 30_000},
		{Bidder: 1, DateTime: 31_000},
	}
	var got []string
	err := UserSessions(slices.Values(bids), 30_000, func(bidder, count, start, end int64) {
		got = append(got, string(AppendQ11(nil, bidder, count, start, end)))
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	// Bidder 1's second session ends at 29,999; bidder 2's second and
	// bidder 1's third end after 30,000 and are not checked.
	want := []string{"1,1,19999,29999", "1,2,0,19999", "2,1,1000,11000"}
	if !slices.Equal(got, want) {
		t.Errorf("sessions %v, want %v", got, want)
	}
	for v, want := range map[string]int64{"1,1,19999,29999": 29_999, "2,1,1000,11000": 11_000} {
		if end, err := OutputEnd("q11", []byte(v)); err != nil || end != want {
			t.Errorf("OutputEnd(q11, %s) = %d, %v; want %d", v, end, err, want)
		}
	}
	if end, err := OutputEnd("q7", []byte("20000,1,2,3,4")); err != nil || end != 30_000 {
		t.Errorf("OutputEnd(q7) = %d, %v", end, err)
	}
	if _, err := OutputEnd("q11", []byte("x")); err == nil {
		t.Error("OutputEnd(q11, x): no error")
	}
	err = UserSessions(slices.Values([]Bid{{DateTime: 5}, {DateTime: 4}}), 100, func(int64, int64, int64, int64) {})
	if err == nil || !strings.Contains(err.Error(), "event-time order") {
		t.Errorf("bids out of order: %v", err)
	}
}

// TestUserSessionsOfTheGenerator checks that q11 has checked outputs on
// a short run: the generator's bidders are not all hot.
func TestUserSessionsOfTheGenerator(t *testing.T) {
	n, err := Expected("q11", 1, 0, 200_000)
	if err != nil || n == 0 {
		t.Fatalf("Expected(q11) over 200,000 events = %d, %v; want some sessions", n, err)
	}
}
