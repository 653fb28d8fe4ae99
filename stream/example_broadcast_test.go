package stream_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// rule blocks a user's clicks from an event time on.
type rule struct {
	User string
	From time.Time
}

// A low-volume stream of rules reaches every subtask of the keyed click
// counter, which keeps them in broadcast state; at 13:00, an event-time
// timer, by when the watermarks of both inputs say every rule before it
// arrived, reports each user's clicks, with the blocked ones left out.
func ExampleBroadcastProcess() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	j, _, clicked := impressionsAndClicks("broadcast")
	rules := stream.SourceWithEventTime(j, "rules", fixed[rule]{{"ann", at(35)}}, stream.EventTime[rule]{Timestamp: func(r rule) time.Time { return r.From }})
	type fn = stream.BroadcastProcessFunc[string, click, rule, string]
	report := stream.BroadcastProcess(clicked, rules, "counts", func(ctx *stream.Context[string]) (fn, error) {
		blocked, err := stream.NewBroadcastState(ctx, "blocked", state.StringCodec{}, state.JSONCodec[time.Time]{})
		if err != nil {
			return fn{}, err
		}
		seen, err := state.NewListState(ctx.State(), "clicks", state.JSONCodec[time.Time]{})
		if err != nil {
			return fn{}, err
		}
		return fn{
			Process: func(ctx *stream.Context[string], c click, _ *stream.Output[string]) error {
				seen.Add(c.At)
				ctx.RegisterEventTimer(at(60))
				return nil
			},
			ProcessBroadcast: func(_ *stream.BroadcastContext, r rule, _ *stream.Output[string]) error {
				return blocked.Put(r.User, r.From)
			},
			OnEventTimer: func(ctx *stream.Context[string], when time.Time, out *stream.Output[string]) error {
				from, isBlocked := blocked.Get(ctx.Key())
				var kept []string
				for t := range seen.All() {
					if !isBlocked || t.Before(from) {
						kept = append(kept, t.Format("15:04"))
					}
				}
				out.Emit(fmt.Sprintf("%s at %s: clicks %s", ctx.Key(), when.Format("15:04"), strings.Join(kept, " ")))
				return nil
			},
		}, nil
	})
	stream.SinkTo(report, "out", fileSink(dir, "out", func(s string) string { return s }))
	runExample(j, dir)
	printCommitted(dir, "out")
	// Output:
	// out:
	//   ann at 13:00: clicks 12:05 12:31
	//   bob at 13:00: clicks 12:20
}

// AsyncMap looks every click's user up in a slow service, ten calls at a
// time; the results keep the clicks' order, and a checkpoint holds the
// clicks whose lookups were in flight, so that a restore asks again.
func ExampleAsyncMap() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	j := stream.New("async")
	clicked := stream.Source(j, "clicks", clicks{{"ann", at(5)}, {"bob", at(20)}, {"ann", at(31)}, {"ann", at(40)}})
	countries := map[string]string{"ann": "NO", "bob": "PT"}
	lookup := func(ctx context.Context, c click) (string, error) {
		select {
		case <-time.After(time.Millisecond): // the service's latency
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return fmt.Sprintf("%s %s from %s", c.At.Format("15:04"), c.User, countries[c.User]), nil
	}
	located := stream.AsyncMap(clicked, "countries", state.JSONCodec[click]{}, lookup, stream.AsyncOptions{Capacity: 10})
	stream.SinkTo(located, "out", fileSink(dir, "out", func(s string) string { return s }))
	runExample(j, dir)
	printCommitted(dir, "out")
	// Output:
	// out:
	//   12:05 ann from NO
	//   12:20 bob from PT
	//   12:31 ann from NO
	//   12:40 ann from NO
}
