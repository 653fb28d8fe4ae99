package main

import (
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/exactlyonce/exactly/bench/nexmark"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// q3Event is an input record parsed for q3: a person it keeps (its
// output fields "name,city,state"), an auction it keeps (its id and
// seller), or anything else (skip).
type q3Event struct {
	person      bool
	id, seller  int64
	fields      []byte
	skip        bool
	inputMillis int64 // the input record's timestamp, Unix ms
}

// parseQ3Event is q3's Kafka deserializer.
func parseQ3Event(v []byte) (q3Event, error) {
	k, p, a, err := nexmark.ParsePersonOrAuction(v)
	switch {
	case err != nil:
		return q3Event{}, err
	case k == nexmark.PersonKind && nexmark.Q3SelectsPerson(p):
		fields := nexmark.AppendQ3(nil, p, 0)
		return q3Event{person: true, id: p.ID, fields: fields[:len(fields)-len(",0")]}, nil
	case k == nexmark.AuctionKind && nexmark.Q3SelectsAuction(a):
		return q3Event{id: a.ID, seller: a.Seller}, nil
	}
	return q3Event{skip: true}, nil
}

// localItems is q3: the persons it selects keyed by id and the auctions it
// selects keyed by seller, in an unbounded inner join that keeps both.
func localItems(j *stream.Job, c config, in kafka.SourceOptions) (stream.Stream[result], error) {
	src, err := kafka.NewSource(in, parseQ3Event)
	if err != nil {
		return stream.Stream[result]{}, err
	}
	events := stream.Source(j, "events", src, stream.Parallelism(c.parallelism))
	kept := func(person bool) func(kafka.Record[q3Event], []q3Event) []q3Event {
		return func(r kafka.Record[q3Event], out []q3Event) []q3Event {
			if e := r.Value; !e.skip && e.person == person {
				e.inputMillis = r.Timestamp.UnixMilli()
				out = append(out, e)
			}
			return out
		}
	}
	persons := stream.KeyBy(stream.FlatMap(events, kept(true)), func(e q3Event) int64 { return e.id }, state.Int64Codec{})
	auctions := stream.KeyBy(stream.FlatMap(events, kept(false)), func(e q3Event) int64 { return e.seller }, state.Int64Codec{})
	return stream.InnerJoin(persons, auctions, "local-items",
		stream.JoinInputs[q3Event, q3Event]{Codec1: q3EventCodec{}, Codec2: q3EventCodec{}},
		func(_ int64, p, a q3Event) result {
			v := append(append(make([]byte, 0, outCap), p.fields...), ',')
			return result{value: strconv.AppendInt(v, a.id, 10), time: time.UnixMilli(max(p.inputMillis, a.inputMillis))}
		}, stream.Parallelism(c.parallelism)), nil
}

// q3EventCodec encodes a kept person or auction: a byte 1 for a person, 0
// for an auction, the id, the seller and the input's timestamp as
// varints, then the person's fields.
type q3EventCodec struct{}

func (q3EventCodec) Append(dst []byte, e q3Event) []byte {
	var person byte
	if e.person {
		person = 1
	}
	dst = append(dst, person)
	dst = binary.AppendVarint(dst, e.id)
	dst = binary.AppendVarint(dst, e.seller)
	dst = binary.AppendVarint(dst, e.inputMillis)
	return append(dst, e.fields...)
}

func (q3EventCodec) Decode(src []byte) (q3Event, error) {
	if len(src) == 0 || src[0] > 1 {
		return q3Event{}, errMalformedQ3
	}
	e := q3Event{person: src[0] == 1}
	src = src[1:]
	for _, dst := range []*int64{&e.id, &e.seller, &e.inputMillis} {
		v, n := binary.Varint(src)
		if n <= 0 {
			return q3Event{}, errMalformedQ3
		}
		*dst, src = v, src[n:]
	}
	if len(src) > 0 {
		e.fields = slices.Clone(src)
	}
	return e, nil
}

// errMalformedQ3 is the error of a kept q3 event that does not decode.
var errMalformedQ3 = errors.New("exactly-nexmark: malformed q3 state entry")
