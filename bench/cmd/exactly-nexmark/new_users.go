package main

import (
	"errors"
	"slices"
	"time"

	"github.com/exactlyonce/exactly/bench/nexmark"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// userEvent is an input record parsed for q8: a person joining or an
// auction's seller selling, with its dateTime; a bid (skip) q8 drops.
type userEvent struct {
	person bool
	id     int64  // the person's, or the auction's seller
	name   []byte // the person's
	at     int64  // dateTime, Unix ms
	skip   bool
}

// parseUserEvent is q8's Kafka deserializer.
func parseUserEvent(v []byte) (userEvent, error) {
	k, p, a, err := nexmark.ParsePersonOrAuction(v)
	switch {
	case err != nil:
		return userEvent{}, err
	case k == nexmark.PersonKind:
		return userEvent{person: true, id: p.ID, name: slices.Clone(p.Name), at: p.DateTime}, nil
	case k == nexmark.AuctionKind:
		return userEvent{id: a.Seller, at: a.DateTime}, nil
	}
	return userEvent{skip: true}, nil
}

// newUser is q8's accumulator of one person id and window: whether the
// person joined (with its name) and sold in it.
type newUser struct {
	name         []byte
	joined, sold bool
}

// newUsers is q8: persons and auctions keyed by person id (an auction by
// its seller) in tumbling windows of event time; a person who joined and
// sold in one window is output once, when the window closes. Watermarks
// trail each partition's newest person or auction by one second.
func newUsers(j *stream.Job, c config, in kafka.SourceOptions) (stream.Stream[result], error) {
	src, err := kafka.NewSource(in, parseUserEvent)
	if err != nil {
		return stream.Stream[result]{}, err
	}
	at := func(e userEvent) time.Time { return time.UnixMilli(e.at) }
	events := stream.SourceWithEventTime(j, "events", src,
		stream.EventTime[kafka.Record[userEvent]]{Timestamp: func(r kafka.Record[userEvent]) time.Time { return at(r.Value) }, MaxOutOfOrderness: outOfOrder},
		stream.Parallelism(c.parallelism))
	users := stream.FlatMap(events, func(r kafka.Record[userEvent], out []userEvent) []userEvent {
		if !r.Value.skip {
			out = append(out, r.Value)
		}
		return out
	})
	byID := stream.KeyBy(users, func(e userEvent) int64 { return e.id }, state.Int64Codec{})
	found := stream.WindowAggregate(byID, "new-users", stream.Tumbling(nexmark.Q8Size*time.Millisecond), at,
		stream.Aggregate[int64, userEvent, newUser, []result]{
			Add: func(u newUser, e userEvent) newUser {
				if e.person {
					u.joined, u.name = true, e.name
				} else {
					u.sold = true
				}
				return u
			},
			Result: func(id int64, w stream.Window, u newUser) []result {
				if !u.joined || !u.sold {
					return nil
				}
				return []result{{value: nexmark.AppendQ8(make([]byte, 0, outCap), id, u.name, w.Start.UnixMilli()), time: w.End}}
			},
			Codec: newUserCodec{},
		}, stream.Parallelism(c.parallelism))
	return flatten(found), nil
}

// newUserCodec encodes q8's accumulator: a flags byte (1 joined, 2 sold)
// and the name.
type newUserCodec struct{}

func (newUserCodec) Append(dst []byte, u newUser) []byte {
	var flags byte
	if u.joined {
		flags |= 1
	}
	if u.sold {
		flags |= 2
	}
	return append(append(dst, flags), u.name...)
}

func (newUserCodec) Decode(src []byte) (newUser, error) {
	if len(src) == 0 || src[0]&^3 != 0 {
		return newUser{}, errors.New("exactly-nexmark: malformed q8 accumulator")
	}
	return newUser{joined: src[0]&1 != 0, sold: src[0]&2 != 0, name: slices.Clone(src[1:])}, nil
}
