package pipeline

import (
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/pipeline/internal/record"
	"github.com/exactlyonce/exactly/source"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// item is what flows between the pipeline's operators: a record, or a
// dead letter in its place.
type item struct {
	rec  record.Record
	ts   int64 // event time, Unix nanoseconds (with event_time)
	dead *deadLetter
	key  string // before an aggregate: the key's text
	args []any  // before an aggregate: one argument per aggregate
}

// deadLetter is a record that failed to decode or to evaluate.
type deadLetter struct {
	stage, err, value string
}

// deadLetterSchema is the schema of the dead-letter sink's records.
var deadLetterSchema = record.Schema{{Name: "stage", Type: record.String}, {Name: "error", Type: record.String}, {Name: "value", Type: record.String}}

// record returns the dead letter as a record of deadLetterSchema.
func (d *deadLetter) record() record.Record {
	return record.Record{"stage": d.stage, "error": d.err, "value": d.value}
}

// kill returns the dead letter of a record that failed at stage.
func kill(it item, stage string, err error) item {
	return item{ts: it.ts, dead: &deadLetter{stage: stage, err: err.Error(), value: string(record.AppendJSON(nil, recordSchema(it.rec), it.rec))}}
}

// recordSchema returns a schema of rec's fields in name order, for dead
// letters' values.
func recordSchema(rec record.Record) record.Schema {
	s := make(record.Schema, 0, len(rec))
	for _, name := range sortedKeys(rec) {
		s = append(s, record.Field{Name: name})
	}
	return s
}

// build builds the job of the plan. It does no I/O.
func (p *plan) build() (*stream.Job, error) {
	j := stream.New(p.cfg.Name)
	if p.cfg.State.Backend == "pebble" {
		j.SetStateBackend(state.BackendConfig{Kind: state.PebbleBackend, Dir: p.cfg.State.Dir})
	}
	s, err := p.addSource(j)
	if err != nil {
		return nil, p.doc.Errorf(&p.cfg.Source, "source: %v", err)
	}
	var deads []stream.Stream[item]
	for _, st := range p.steps {
		switch {
		case st.filter != nil:
			s = p.filter(s, st)
		case st.fields != nil:
			s = p.mapRecords(s, st)
		case st.agg != nil:
			pre := p.prepareAggregate(s, st)
			deads = append(deads, stream.Filter(pre, isDead, stream.Name(st.what+".dead-letters")))
			s = p.keyed(stream.Filter(pre, isLive, stream.Name(st.what+".records")), st.agg)
		}
	}
	if len(deads) > 0 {
		s = stream.Union(s, deads...)
	}
	if err := p.addSinks(s); err != nil {
		return nil, err
	}
	return j, nil
}

// isDead reports whether it is a dead letter.
func isDead(it item) bool { return it.dead != nil }

// isLive reports whether it is a record.
func isLive(it item) bool { return it.dead == nil }

// sourceOptions returns the options of the source operator.
func (p *plan) sourceOptions() []stream.SourceOption {
	if n := p.cfg.Source.Parallelism; n > 0 {
		return []stream.SourceOption{stream.Parallelism(n)}
	}
	return nil
}

// addSource adds the source, decoding and timestamping its records.
func (p *plan) addSource(j *stream.Job) (stream.Stream[item], error) {
	cfg := p.cfg.Source
	switch cfg.Kind {
	case "generator":
		src, err := generator.New(generator.Options{Count: cfg.Count, Splits: cfg.Splits, Rate: cfg.Rate}, p.generated)
		if err != nil {
			return stream.Stream[item]{}, err
		}
		return withEventTime(j, p, src, func(it item) int64 { return it.ts }), nil
	case "file":
		src, err := file.NewSource(cfg.Paths, func(line []byte) (item, error) { return p.decoded(line), nil })
		if err != nil {
			return stream.Stream[item]{}, err
		}
		return withEventTime(j, p, src, func(it item) int64 { return it.ts }), nil
	}
	src, err := kafka.NewSource(kafka.SourceOptions{
		Conn:    kafka.Conn{Brokers: cfg.Brokers, SASL: sasl(cfg.SASL)},
		Topics:  cfg.Topics,
		Start:   map[string]kafka.StartOffset{"earliest": kafka.Earliest(), "latest": kafka.Latest()}[cfg.Start],
		Bounded: cfg.Bounded,
	}, func(b []byte) (item, error) { return p.decoded(b), nil })
	if err != nil {
		return stream.Stream[item]{}, err
	}
	recs := withEventTime(j, p, src, func(r kafka.Record[item]) int64 { return r.Value.ts })
	return stream.Map(recs, func(r kafka.Record[item]) item {
		if r.Value.dead != nil {
			r.Value.dead.stage = fmt.Sprintf("decode %s/%d@%d", r.Topic, r.Partition, r.Offset)
		}
		return r.Value
	}, stream.Name("records")), nil
}

// withEventTime adds src to j, with event time when the pipeline has it.
func withEventTime[T any](j *stream.Job, p *plan, src source.Source[T], ts func(T) int64) stream.Stream[T] {
	if p.eventTime == nil {
		return stream.Source(j, "source", src, p.sourceOptions()...)
	}
	return stream.SourceWithEventTime(j, "source", src, stream.EventTime[T]{
		Timestamp:         func(v T) time.Time { return time.Unix(0, ts(v)) },
		MaxOutOfOrderness: p.cfg.EventTime.MaxOutOfOrderness,
	}, p.sourceOptions()...)
}

// sasl returns the connector's SASL settings.
func sasl(s *configSASL) kafka.SASL {
	if s == nil {
		return kafka.SASL{}
	}
	return kafka.SASL{Mechanism: kafka.SASLMechanism(s.Mechanism), User: s.User, Password: s.Password}
}

// generated returns the generator's record number i.
func (p *plan) generated(i uint64) item {
	env := record.Record{"index": int(i)}
	rec := make(record.Record, len(p.generate))
	for _, f := range p.generate {
		v, err := f.prog.eval(env)
		if err != nil {
			return item{dead: &deadLetter{stage: "source.fields." + f.name, err: err.Error(), value: fmt.Sprintf(`{"index":%d}`, i)}}
		}
		rec[f.name] = v
	}
	return p.timestamped(rec, "source")
}

// decoded returns the record of one message or line.
func (p *plan) decoded(data []byte) item {
	rec, err := p.decode(data)
	if err != nil {
		return item{dead: &deadLetter{stage: "decode", err: err.Error(), value: string(data)}}
	}
	return p.timestamped(rec, "decode")
}

// timestamped returns the item of rec with its event time.
func (p *plan) timestamped(rec record.Record, stage string) item {
	it := item{rec: rec}
	if p.eventTime == nil {
		return it
	}
	v, err := p.eventTime.eval(rec)
	if err != nil {
		return kill(it, "event_time", err)
	}
	switch t := v.(type) {
	case time.Time:
		if t.IsZero() {
			return kill(it, "event_time", fmt.Errorf("%s: the event time is missing", p.eventTime.src))
		}
		it.ts = t.UnixNano()
	case int:
		it.ts = int64(t) * int64(time.Millisecond)
	}
	return it
}

// filter adds a filter step.
func (p *plan) filter(s stream.Stream[item], st step) stream.Stream[item] {
	return stream.FlatMap(s, func(in item, out []item) []item {
		if in.dead != nil {
			return append(out, in)
		}
		keep, err := st.filter.eval(in.rec)
		switch {
		case err != nil:
			return append(out, kill(in, st.what, err))
		case keep.(bool):
			return append(out, in)
		}
		return out
	}, stream.Name(st.what))
}

// mapRecords adds a map step.
func (p *plan) mapRecords(s stream.Stream[item], st step) stream.Stream[item] {
	return stream.Map(s, func(in item) item {
		if in.dead != nil {
			return in
		}
		rec := make(record.Record, len(st.fields))
		for _, f := range st.fields {
			v, err := f.prog.eval(in.rec)
			if err != nil {
				return kill(in, st.what+"."+f.name, err)
			}
			rec[f.name] = v
		}
		return item{rec: rec, ts: in.ts}
	}, stream.Name(st.what))
}

// prepareAggregate evaluates the key and the aggregates' arguments of
// each record, ahead of the keyed operator.
func (p *plan) prepareAggregate(s stream.Stream[item], st step) stream.Stream[item] {
	ap := st.agg
	return stream.Map(s, func(in item) item {
		if in.dead != nil {
			return in
		}
		k, err := ap.key.eval(in.rec)
		if err != nil {
			return kill(in, st.what+".key_by", err)
		}
		in.key = keyString(k)
		in.args = make([]any, len(ap.values))
		for i, v := range ap.values {
			if v.arg == nil {
				continue
			}
			if in.args[i], err = v.arg.eval(in.rec); err != nil {
				return kill(in, st.what+".values."+v.name, err)
			}
		}
		return in
	}, stream.Name(st.what+".key"))
}
