package pipeline

import (
	"errors"
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/pipeline/internal/record"
	"github.com/exactlyonce/exactly/pipeline/internal/yamlconf"
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
		c := state.BackendConfig{Kind: state.PebbleBackend, Dir: p.cfg.State.Dir}
		if p.cfg.State.Memory > 0 {
			var err error
			if c.Memory, err = state.NewMemory(int64(p.cfg.State.Memory) << 20); err != nil {
				return nil, err
			}
		}
		j.SetStateBackend(c)
	}
	b := &builder{plan: p, streams: map[string]stream.Stream[item]{}, late: map[string]stream.OutputTag[item]{}}
	for _, in := range p.inputs {
		s, err := p.addSource(j, in)
		var placed *yamlconf.Error
		switch {
		case errors.As(err, &placed):
			return nil, placed // at the field it is about
		case err != nil:
			return nil, p.doc.Errorf(in.cfg, "%s: %v", in.what, err)
		}
		b.add(in.name, s)
	}
	for _, sp := range p.streams {
		b.transform(sp)
	}
	// The dead letters' outputs last: the others split off theirs.
	for _, dead := range []bool{false, true} {
		for _, o := range p.outputs {
			if (o.from == deadLettersName) != dead {
				continue
			}
			if err := b.addSink(o); err != nil {
				return nil, err
			}
		}
	}
	return j, nil
}

// builder builds the job's graph from its inputs to its outputs.
type builder struct {
	*plan
	streams map[string]stream.Stream[item] // by name: inputs, streams and late records (orders.late)
	late    map[string]stream.OutputTag[item]
	deads   []stream.Stream[item] // the dead letters split off so far
}

// add names s, the records (and dead letters) of an input or a stream.
// When the pipeline keeps dead letters and several read s, its dead
// letters are split off here, so that each goes to dead_letters once;
// otherwise they flow on with the records to the one that reads s.
func (b *builder) add(name string, s stream.Stream[item]) {
	if b.dead && b.nodes[name].consumers > 1 {
		b.deads = append(b.deads, stream.Filter(s, isDead, stream.Name(name+".dead-letters")))
		s = stream.Filter(s, isLive, stream.Name(name+".records"))
	}
	b.streams[name] = s
}

// transform adds the union of a stream's inputs and its steps.
func (b *builder) transform(sp *streamPlan) {
	ins := make([]stream.Stream[item], len(sp.from))
	for i, from := range sp.from {
		ins[i] = b.streams[from]
	}
	s := ins[0]
	if len(ins) > 1 {
		s = stream.Union(ins[0], ins[1:]...)
	}
	n := b.nodes[sp.name]
	for _, st := range sp.steps {
		switch {
		case st.filter != nil:
			s = b.filter(s, st)
		case st.fields != nil:
			s = b.mapRecords(s, st)
		case st.agg != nil:
			pre := b.prepareAggregate(s, st)
			b.deads = append(b.deads, stream.Filter(pre, isDead, stream.Name(st.what+".dead-letters")))
			var tag *stream.OutputTag[item]
			if st.agg.window != nil && n.lateConsumers > 0 {
				t := stream.NewOutputTag[item](sp.name + lateSuffix)
				tag = &t
			}
			s = b.keyed(stream.Filter(pre, isLive, stream.Name(st.what+".records")), st.agg, tag)
			if tag != nil {
				b.streams[sp.name+lateSuffix] = stream.SideOutput(s, *tag)
			}
		}
	}
	b.add(sp.name, s)
}

// isDead reports whether it is a dead letter.
func isDead(it item) bool { return it.dead != nil }

// isLive reports whether it is a record.
func isLive(it item) bool { return it.dead == nil }

// sourceOptions returns the options of an input's source operator.
func (in *inputPlan) sourceOptions() []stream.SourceOption {
	if n := in.cfg.Parallelism; n > 0 {
		return []stream.SourceOption{stream.Parallelism(n)}
	}
	return nil
}

// addSource adds the input's source, decoding and timestamping its
// records.
func (p *plan) addSource(j *stream.Job, in *inputPlan) (stream.Stream[item], error) {
	cfg := in.cfg
	switch cfg.Kind {
	case "generator":
		src, err := generator.New(generator.Options{Count: cfg.Count, Splits: cfg.Splits, Rate: cfg.Rate}, in.generated)
		if err != nil {
			return stream.Stream[item]{}, err
		}
		return withEventTime(j, in, src, func(it item) int64 { return it.ts }), nil
	case "file":
		src, err := file.NewSource(cfg.Paths, func(line []byte) (item, error) { return in.decoded(line), nil })
		if err != nil {
			return stream.Stream[item]{}, err
		}
		return withEventTime(j, in, src, func(it item) int64 { return it.ts }), nil
	}
	conn, err := p.kafkaConn(cfg.Brokers, cfg.SASL, cfg.TLS)
	if err != nil {
		return stream.Stream[item]{}, err
	}
	src, err := kafka.NewSource(kafka.SourceOptions{
		Conn:    conn,
		Topics:  cfg.Topics,
		Start:   map[string]kafka.StartOffset{"earliest": kafka.Earliest(), "latest": kafka.Latest()}[cfg.Start],
		Bounded: cfg.Bounded,
	}, func(b []byte) (item, error) { return in.decoded(b), nil })
	if err != nil {
		return stream.Stream[item]{}, err
	}
	recs := withEventTime(j, in, src, func(r kafka.Record[item]) int64 { return r.Value.ts })
	return stream.Map(recs, func(r kafka.Record[item]) item {
		if r.Value.dead != nil {
			r.Value.dead.stage = fmt.Sprintf("decode %s/%d@%d", r.Topic, r.Partition, r.Offset)
		}
		return r.Value
	}, stream.Name(in.prefix()+"records")), nil
}

// prefix is the start of the names of the operators that follow the
// input's source: "" for the pipeline's one source, else "name.".
func (in *inputPlan) prefix() string {
	if in.what == "source" {
		return ""
	}
	return in.name + "."
}

// withEventTime adds src to j as the input in, with event time when it has it.
func withEventTime[T any](j *stream.Job, in *inputPlan, src source.Source[T], ts func(T) int64) stream.Stream[T] {
	if in.eventTime == nil {
		return stream.Source(j, in.name, src, in.sourceOptions()...)
	}
	return stream.SourceWithEventTime(j, in.name, src, stream.EventTime[T]{
		Timestamp:         func(v T) time.Time { return time.Unix(0, ts(v)) },
		MaxOutOfOrderness: in.eventCfg.MaxOutOfOrderness,
		IdleTimeout:       in.eventCfg.IdleTimeout,
	}, in.sourceOptions()...)
}

// sasl returns the connector's SASL settings.
func sasl(s *configSASL) kafka.SASL {
	if s == nil {
		return kafka.SASL{}
	}
	return kafka.SASL{Mechanism: kafka.SASLMechanism(s.Mechanism), User: s.User, Password: s.Password}
}

// generated returns the generator's record number i.
func (in *inputPlan) generated(i uint64) item {
	env := record.Record{"index": int(i)}
	rec := make(record.Record, len(in.generate))
	for _, f := range in.generate {
		v, err := f.prog.eval(env)
		if err != nil {
			return item{dead: &deadLetter{stage: in.what + ".fields." + f.name, err: err.Error(), value: fmt.Sprintf(`{"index":%d}`, i)}}
		}
		rec[f.name] = v
	}
	return in.timestamped(rec)
}

// decoded returns the record of one message or line.
func (in *inputPlan) decoded(data []byte) item {
	rec, err := in.decode(data)
	if err != nil {
		return item{dead: &deadLetter{stage: in.decodeWhat, err: err.Error(), value: string(data)}}
	}
	return in.timestamped(rec)
}

// timestamped returns the item of rec with its event time.
func (in *inputPlan) timestamped(rec record.Record) item {
	it := item{rec: rec}
	if in.eventTime == nil {
		return it
	}
	v, err := in.eventTime.eval(rec)
	if err != nil {
		return kill(it, in.eventWhat, err)
	}
	switch t := v.(type) {
	case time.Time:
		if t.IsZero() {
			return kill(it, in.eventWhat, fmt.Errorf("%s: the event time is missing", in.eventTime.src))
		}
		it.ts = t.UnixNano()
	case int:
		it.ts = int64(t) * int64(time.Millisecond)
	}
	return it
}

// filter adds a filter step.
func (b *builder) filter(s stream.Stream[item], st step) stream.Stream[item] {
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
func (b *builder) mapRecords(s stream.Stream[item], st step) stream.Stream[item] {
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
func (b *builder) prepareAggregate(s stream.Stream[item], st step) stream.Stream[item] {
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
