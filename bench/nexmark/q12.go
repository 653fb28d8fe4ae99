package nexmark

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
)

// q12 (processing time windows), of Flink's Nexmark suite: per bidder and
// tumbling window of Q12Window of processing time, the number of its
// bids, as "bidder,count,start,end" (start and end in Unix ms of the
// system's clock), keyed by the bidder. Which window a bid falls in
// depends on when the system processed it, so the windows are not checked
// one by one: the runner sums the counts per bidder (see Summing) into a
// table, which must be ReferenceTable's, "bidder,bids" per bidder. A
// window counted twice (after a recovery) or lost shows as a wrong row.
const Q12Window = 10 * time.Second

// Summing reports whether query q's rows are summed per key into the
// table that its check compares (see Updating): q12.
func Summing(q string) bool { return q == "q12" }

// AppendQ12 appends the q12 row of bidder's count bids in the window that
// starts at start, in Unix ms.
func AppendQ12(dst []byte, bidder, count, start int64) []byte {
	return appendFields(dst, bidder, count, start, start+Q12Window.Milliseconds())
}

// ParseQ12 returns the bidder and the count of a q12 row.
func ParseQ12(row []byte) (bidder, count int64, err error) {
	f := bytes.SplitN(row, []byte{','}, 3)
	if len(f) == 3 {
		var ok1, ok2 bool
		bidder, ok1 = parseInt(f[0])
		count, ok2 = parseInt(f[1])
		if ok1 && ok2 && count > 0 {
			return bidder, count, nil
		}
	}
	return 0, 0, fmt.Errorf("nexmark: not a q12 row (bidder,count,start,end): %q", row)
}

// AppendQ12Sum appends the row of q12's checked table: "bidder,bids".
func AppendQ12Sum(dst []byte, bidder, bids int64) []byte { return appendFields(dst, bidder, bids) }

// bidsPerBidder returns the reference q12 table over events [from, to).
func bidsPerBidder(seed, from, to uint64) map[string]string {
	bids := map[int64]int64{}
	for b := range Bids(seed, from, to) {
		bids[b.Bidder]++
	}
	table := make(map[string]string, len(bids))
	for bidder, n := range bids {
		table[strconv.FormatInt(bidder, 10)] = string(AppendQ12Sum(nil, bidder, n))
	}
	return table
}
