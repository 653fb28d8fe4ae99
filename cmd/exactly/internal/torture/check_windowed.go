package torture

import (
	"context"
	"time"
)

// CheckKafkaWindows checks the output topic of the windowed branch's
// exactly-once Kafka sink: the committed records that readCommitted finds,
// partition by partition in offset order, are checked against x's windows
// by [Expected.CheckWindows].
func CheckKafkaWindows(ctx context.Context, x *Expected, name, brokers, topic string, txnPrefixes []string) (SinkResult, error) {
	return checkTopic(ctx, name, brokers, topic, txnPrefixes, parseWindow, x.CheckWindows)
}

// CheckWindows verifies the committed output of a windowed sink, given as
// ordered streams (the windows of one key are expected in start order
// within a stream), against the windows computed from the workload: one
// record per key and window with events, with the window's count and sum.
// res may carry counts found by the sink's reader (aborted visible,
// lingering) and is completed.
func (x *Expected) CheckWindows(res SinkResult, streams [][]WindowOut) SinkResult {
	res.Unit = unitWindows
	seen := make([]int, len(x.windows))
	for _, s := range streams {
		order := map[string]int64{} // latest window start per key in this stream
		for _, w := range s {
			res.Records++
			k, ok := x.window[windowID{w.Key, w.Start}]
			if !ok {
				res.Unexpected++
				res.example("unexpected window %+v", w)
				continue
			}
			seen[k]++
			if seen[k] > 1 {
				res.Duplicates++
				res.example("duplicate of window %s, copy %d", describeWindow(w), seen[k])
				continue
			}
			if last, ok := order[w.Key]; ok && w.Start < last {
				res.OutOfOrder++
				res.example("window %s after the window starting %s", describeWindow(w), time.UnixMilli(last).UTC().Format(time.StampMilli))
			}
			order[w.Key] = max(order[w.Key], w.Start)
			if want := x.windows[k]; w != want {
				res.WrongTotals++
				res.example("window %s: count %d, sum %d; want count %d, sum %d", describeWindow(w), w.Count, w.Sum, want.Count, want.Sum)
			}
		}
	}
	for k, n := range seen {
		if n == 0 {
			res.Missing++
			res.example("window %s (count %d) missing", describeWindow(x.windows[k]), x.windows[k].Count)
		} else {
			res.Verified++
		}
	}
	return res
}

// describeWindow names w's key and event-time span.
func describeWindow(w WindowOut) string {
	start := time.UnixMilli(w.Start).UTC()
	return "of key " + w.Key + " [" + start.Format(time.StampMilli) + ", " + start.Add(windowSize).Format(time.StampMilli) + ")"
}
