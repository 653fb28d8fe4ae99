package stream_test

import (
	"fmt"
	"os"
	"time"

	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// clickTime is a click's event time.
func clickTime(c click) time.Time { return c.At }

// byUser keys clicks by user.
func byUser(s stream.Stream[click]) stream.KeyedStream[string, click] {
	return stream.KeyBy(s, func(c click) string { return c.User }, state.StringCodec{})
}

// impressionsAndClicks returns a job reading ad impressions and clicks,
// each a click record with event time.
func impressionsAndClicks(name string) (j *stream.Job, impressions, clicked stream.KeyedStream[string, click]) {
	j = stream.New(name)
	et := stream.EventTime[click]{Timestamp: clickTime}
	impressions = byUser(stream.SourceWithEventTime(j, "impressions", clicks{{"ann", at(0)}, {"bob", at(2)}, {"ann", at(30)}}, et))
	clicked = byUser(stream.SourceWithEventTime(j, "clicks", clicks{{"ann", at(5)}, {"bob", at(20)}, {"ann", at(31)}, {"ann", at(40)}}, et))
	return j, impressions, clicked
}

// clickInputs are clicks as the inputs of a join.
var clickInputs = stream.JoinInputs[click, click]{Time1: clickTime, Time2: clickTime, Codec1: state.JSONCodec[click]{}, Codec2: state.JSONCodec[click]{}}

// A two-input process function counts each user's impressions and clicks
// in one keyed state, and reports them at 13:00 by an event-time timer,
// which fires once the watermarks of both inputs passed it.
func ExampleCoProcess() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	j, impressions, clicked := impressionsAndClicks("co-process")
	type counts struct{ Impressions, Clicks int }
	report := stream.CoProcess(impressions, clicked, "counts", func(ctx *stream.Context[string]) (stream.CoProcessFunc[string, click, click, string], error) {
		n, err := state.NewValueState(ctx.State(), "counts", state.JSONCodec[counts]{})
		if err != nil {
			return stream.CoProcessFunc[string, click, click, string]{}, err
		}
		return stream.CoProcessFunc[string, click, click, string]{
			Process1: func(ctx *stream.Context[string], _ click, _ *stream.Output[string]) error {
				c, _ := n.Value()
				c.Impressions++
				n.Update(c)
				ctx.RegisterEventTimer(at(60))
				return nil
			},
			Process2: func(ctx *stream.Context[string], _ click, _ *stream.Output[string]) error {
				c, _ := n.Value()
				c.Clicks++
				n.Update(c)
				return nil
			},
			OnEventTimer: func(ctx *stream.Context[string], when time.Time, out *stream.Output[string]) error {
				c, _ := n.Value()
				out.Emit(fmt.Sprintf("%s at %s: %d impressions, %d clicks", ctx.Key(), when.Format("15:04"), c.Impressions, c.Clicks))
				return nil
			},
		}, nil
	})
	stream.SinkTo(report, "out", fileSink(dir, "out", func(s string) string { return s }))
	runExample(j, dir)
	printCommitted(dir, "out")
	// Output:
	// out:
	//   ann at 13:00: 2 impressions, 3 clicks
	//   bob at 13:00: 1 impressions, 1 clicks
}

// An interval join matches each click with the impressions of the ten
// minutes before it, both ends included: the click at 12:40 matches the
// impression at 12:30, bob's click 18 minutes after his impression
// matches none.
func ExampleIntervalJoin() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	j, impressions, clicked := impressionsAndClicks("interval-join")
	// The first input's time minus the second's: click - impression.
	within := stream.Interval{Lower: 0, Upper: 10 * time.Minute}
	pairs := stream.IntervalJoin(clicked, impressions, "attributed", within, clickInputs, func(user string, c, i click) string {
		return fmt.Sprintf("%s clicked at %s after the impression at %s", user, c.At.Format("15:04"), i.At.Format("15:04"))
	})
	stream.SinkTo(pairs, "out", fileSink(dir, "out", func(s string) string { return s }))
	runExample(j, dir)
	printCommitted(dir, "out")
	// Output:
	// out:
	//   ann clicked at 12:05 after the impression at 12:00
	//   ann clicked at 12:31 after the impression at 12:30
	//   ann clicked at 12:40 after the impression at 12:30
}

// A window join pairs each user's impressions and clicks of the same
// quarter of an hour, emitted when the quarter ends.
func ExampleWindowJoin() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	j, impressions, clicked := impressionsAndClicks("window-join")
	pairs := stream.WindowJoin(impressions, clicked, "quarters", stream.Tumbling(15*time.Minute), clickInputs,
		func(user string, w stream.Window, i, c click) string {
			return fmt.Sprintf("%s %s-%s: impression %s, click %s", user, w.Start.Format("15:04"), w.End.Format("15:04"), i.At.Format("15:04"), c.At.Format("15:04"))
		})
	stream.SinkTo(pairs, "out", fileSink(dir, "out", func(s string) string { return s }))
	runExample(j, dir)
	printCommitted(dir, "out")
	// Output:
	// out:
	//   ann 12:00-12:15: impression 12:00, click 12:05
	//   ann 12:30-12:45: impression 12:30, click 12:31
	//   ann 12:30-12:45: impression 12:30, click 12:40
}

// A cogroup writes a left outer join: each impression of a quarter of an
// hour with the clicks of the same quarter, or alone when there was none.
func ExampleWindowCoGroup() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	j, impressions, clicked := impressionsAndClicks("cogroup")
	rows := stream.WindowCoGroup(impressions, clicked, "quarters", stream.Tumbling(15*time.Minute), clickInputs,
		func(user string, w stream.Window, is, cs []click, out *stream.Output[string]) {
			for _, i := range is {
				if len(cs) == 0 {
					out.Emit(fmt.Sprintf("%s %s: impression %s, no click", user, w.Start.Format("15:04"), i.At.Format("15:04")))
				}
				for _, c := range cs {
					out.Emit(fmt.Sprintf("%s %s: impression %s, click %s", user, w.Start.Format("15:04"), i.At.Format("15:04"), c.At.Format("15:04")))
				}
			}
		})
	stream.SinkTo(rows, "out", fileSink(dir, "out", func(s string) string { return s }))
	runExample(j, dir)
	printCommitted(dir, "out")
	// Output:
	// out:
	//   ann 12:00: impression 12:00, click 12:05
	//   ann 12:30: impression 12:30, click 12:31
	//   ann 12:30: impression 12:30, click 12:40
	//   bob 12:00: impression 12:02, no click
}

// order and address are the records of the inner join's example.
type order struct{ Customer, Item string }
type address struct{ Customer, City string }

// An inner join without time bounds matches every order with every
// address of its customer, whichever came first; a TTL of a day (of event
// time, here never reached) would bound the state the join keeps.
func ExampleInnerJoin() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)

	j := stream.New("inner-join")
	orders := stream.KeyBy(stream.Source(j, "orders", fixed[order]{{"ann", "tea"}, {"bob", "jam"}, {"ann", "cups"}}),
		func(o order) string { return o.Customer }, state.StringCodec{})
	addresses := stream.KeyBy(stream.Source(j, "addresses", fixed[address]{{"ann", "Oslo"}, {"cyd", "Rome"}}),
		func(a address) string { return a.Customer }, state.StringCodec{})
	inputs := stream.JoinInputs[order, address]{Codec1: state.JSONCodec[order]{}, Codec2: state.JSONCodec[address]{}}
	shipped := stream.InnerJoin(orders, addresses, "ship", inputs, func(customer string, o order, a address) string {
		return fmt.Sprintf("%s to %s in %s", o.Item, customer, a.City)
	}, stream.StateTTL(state.TTL{After: 24 * time.Hour}))
	stream.SinkTo(shipped, "out", fileSink(dir, "out", func(s string) string { return s }))
	runExample(j, dir)
	printCommitted(dir, "out")
	// Output:
	// out:
	//   cups to ann in Oslo
	//   tea to ann in Oslo
}
