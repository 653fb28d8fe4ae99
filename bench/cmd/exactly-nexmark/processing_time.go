package main

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/exactlyonce/exactly/bench/nexmark"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// processingWindows builds q12: per bidder, its bids in tumbling windows
// of nexmark.Q12Window of processing time. The engine's windows are on
// event time; a processing-time window is a keyed process function with
// a processing-time timer at its end, as a user writes one.
func processingWindows(j *stream.Job, c config, in kafka.SourceOptions) (stream.Stream[result], error) {
	src, err := kafka.NewSource(in, parseEvent)
	if err != nil {
		return stream.Stream[result]{}, err
	}
	events := stream.Source(j, "events", src, stream.Parallelism(c.parallelism))
	bidders := stream.FlatMap(events, func(r kafka.Record[event], out []timedBidder) []timedBidder {
		if r.Value.isBid {
			out = append(out, timedBidder{bidder: r.Value.Bidder, time: r.Timestamp})
		}
		return out
	})
	byBidder := stream.KeyBy(bidders, func(b timedBidder) int64 { return b.bidder }, state.Int64Codec{})
	return stream.Process(byBidder, "bids-per-window", countPerWindow, stream.Parallelism(c.parallelism)), nil
}

// timedBidder is the bidder of a bid with its record's timestamp.
type timedBidder struct {
	bidder int64
	time   time.Time
}

// openWindow is q12's state of a bidder: the start of its window (Unix
// ms of processing time) and the bids counted in it.
type openWindow struct{ start, count int64 }

// countPerWindow counts a bidder's bids in the window of the time each is
// processed, and emits the window's row when its timer fires, or when a
// bid of a later window comes first (timers fire between records).
func countPerWindow(ctx *stream.Context[int64]) (stream.ProcessFunc[int64, timedBidder, result], error) {
	open, err := state.NewValueState(ctx.State(), "window", openWindowCodec{})
	if err != nil {
		return stream.ProcessFunc[int64, timedBidder, result]{}, err
	}
	size := nexmark.Q12Window.Milliseconds()
	emit := func(ctx *stream.Context[int64], w openWindow, out *stream.Output[result]) {
		out.Emit(result{key: strconv.AppendInt(nil, ctx.Key(), 10), value: nexmark.AppendQ12(make([]byte, 0, outCap), ctx.Key(), w.count, w.start),
			time: time.UnixMilli(w.start + size)})
	}
	return stream.ProcessFunc[int64, timedBidder, result]{
		Process: func(ctx *stream.Context[int64], b timedBidder, out *stream.Output[result]) error {
			now := time.Now().UnixMilli()
			start := now - now%size
			w, ok := open.Value()
			if ok && w.start != start {
				emit(ctx, w, out)
				ctx.DeleteTimer(time.UnixMilli(w.start + size))
				ok = false
			}
			if !ok {
				w = openWindow{start: start}
				ctx.RegisterTimer(time.UnixMilli(start + size))
			}
			w.count++
			open.Update(w)
			return nil
		},
		OnTimer: func(ctx *stream.Context[int64], when time.Time, out *stream.Output[result]) error {
			if w, ok := open.Value(); ok && w.start+size <= when.UnixMilli() {
				emit(ctx, w, out)
				open.Clear()
			}
			return nil
		},
	}, nil
}

// openWindowCodec encodes an openWindow as two varints.
type openWindowCodec struct{}

func (openWindowCodec) Append(dst []byte, w openWindow) []byte {
	return binary.AppendVarint(binary.AppendVarint(dst, w.start), w.count)
}

func (openWindowCodec) Decode(src []byte) (openWindow, error) {
	var w openWindow
	err := allVarints(src, &w.start, &w.count)
	return w, err
}
