package pipeline

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/connectors/postgres"
	"github.com/exactlyonce/exactly/connectors/sqlite"
	"github.com/exactlyonce/exactly/pipeline/internal/config"
	"github.com/exactlyonce/exactly/pipeline/internal/record"
	"github.com/exactlyonce/exactly/pipeline/internal/yamlconf"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/stream"
)

// configSASL is the schema's SASL section.
type configSASL = config.SASL

// sinkPlan is a checked sink: its schema and its compiled message key.
type sinkPlan struct {
	cfg    *config.Sink
	schema record.Schema
	key    *program
}

// checkSink checks the sink of sp, named what, writing records of schema s.
func (p *plan) checkSink(c *compiler, sp *sinkPlan, what string, s record.Schema) {
	cfg := sp.cfg
	sp.schema = s
	if p.doc.Has(&cfg.Key) {
		if prog, ok := c.compile(what+".key", cfg.Key, s, record.String, record.Int, record.Bool); ok {
			sp.key = &prog
		}
	}
	if cfg.Kind == "postgres" {
		names := s.Names()
		switch {
		case cfg.Mode == "upsert" && len(cfg.PrimaryKey) == 0:
			c.errorf(p.doc.Pos(&cfg.Mode), "%s.mode is upsert but primary_key is empty: list the fields that identify a row, such as [%s]", what, example(s))
		case cfg.Mode == "append" && len(cfg.PrimaryKey) > 0:
			c.errorf(p.doc.Pos(&cfg.PrimaryKey), "%s.primary_key is set but mode is append: set \"mode: upsert\" or remove primary_key", what)
		}
		for i, k := range cfg.PrimaryKey {
			if !slices.Contains(names, k) {
				c.errorf(p.doc.Pos(&cfg.PrimaryKey[i]), "%s.primary_key[%d] is %q, which is not an output field: use one of %s", what, i, k, strings.Join(names, ", "))
			}
		}
	}
}

// addSink adds the sink of output o. Dead letters that reach it with its
// records are split off to the dead letters' outputs, or, without one,
// stop the job (see [rejectDead]).
func (b *builder) addSink(o *outputPlan) error {
	rec := func(it item) record.Record { return it.rec }
	if o.from == deadLettersName {
		rec = func(it item) record.Record { return it.dead.record() }
	}
	snk, err := b.newSink(o.sink, o.what, rec)
	var placed *yamlconf.Error
	switch {
	case errors.As(err, &placed):
		return placed // at the field it is about
	case err != nil:
		return b.doc.Errorf(o.sink.cfg, "%s: %v", o.what, err)
	}
	var s stream.Stream[item]
	switch {
	case o.from == deadLettersName:
		s = b.deads[0]
		if len(b.deads) > 1 {
			s = stream.Union(b.deads[0], b.deads[1:]...)
		}
	case !b.dead:
		s, snk = b.streams[o.from], rejectDead{snk}
	case strings.HasSuffix(o.from, lateSuffix) || b.nodes[o.from].consumers > 1:
		s = b.streams[o.from] // no dead letters: split off already
	default:
		s = b.streams[o.from]
		b.deads = append(b.deads, stream.Filter(s, isDead, stream.Name(o.prefix+"dead-letters")))
		s = stream.Filter(s, isLive, stream.Name(o.prefix+"records"))
	}
	stream.SinkTo(s, o.name, snk, o.sink.options()...)
	return nil
}

// options returns the options of a sink operator.
func (sp *sinkPlan) options() []stream.SinkOption {
	if n := sp.cfg.Parallelism; n > 0 {
		return []stream.SinkOption{stream.Parallelism(n)}
	}
	return nil
}

// newSink returns the connector's sink for sp; rec returns an item's
// record.
func (p *plan) newSink(sp *sinkPlan, what string, rec func(item) record.Record) (sink.Sink[item], error) {
	cfg, s := sp.cfg, sp.schema
	switch cfg.Kind {
	case "sqlite":
		cols := make([]sqlite.Column, len(s))
		for i, f := range s {
			cols[i] = sqlite.Column{Name: f.Name, Type: sqliteTypes[f.Type]}
		}
		return sqlite.NewSink(sqlite.Options{Path: cfg.Path, Table: cfg.Table, Columns: cols}, func(it item, row []any) []any {
			r := rec(it)
			for _, f := range s {
				row = append(row, sqlValue(r[f.Name]))
			}
			return row
		})
	case "postgres":
		cols := make([]postgres.Column, len(s))
		for i, f := range s {
			cols[i] = postgres.Column{Name: f.Name, Type: postgresTypes[f.Type]}
		}
		o := postgres.Options{DSN: cfg.DSN, Schema: cfg.Schema, Table: cfg.Table, Columns: cols, CreateTable: true, Key: cfg.PrimaryKey}
		if cfg.Mode == "upsert" {
			o.Write = postgres.Upsert
		}
		return postgres.NewSink(o, func(it item, row []any) []any {
			r := rec(it)
			for _, f := range s {
				row = append(row, r[f.Name])
			}
			return row
		})
	case "file":
		if p.checking {
			return nil, nil // file.NewSink creates the directory: not while checking
		}
		suffix := map[string]string{"json": ".jsonl", "csv": ".csv"}[cfg.Format]
		enc := encoder(cfg.Format, s)
		return file.NewSink(cfg.Dir, func(dst []byte, it item) []byte { return enc(dst, rec(it)) }, file.SinkOptions{Prefix: cfg.Prefix, Suffix: suffix})
	}
	g := kafka.ExactlyOnce
	if p.cfg.Guarantee == "at_least_once" {
		g = kafka.AtLeastOnce
	}
	enc := encoder(cfg.Format, s)
	conn, err := p.kafkaConn(cfg.Brokers, cfg.SASL, cfg.TLS)
	if err != nil {
		return nil, err
	}
	return kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: cfg.Topic, Guarantee: g, CheckpointInterval: p.cfg.Checkpoint.Interval,
		TransactionTimeout: cfg.TransactionTimeout, ReproduceAborted: cfg.ReproduceAborted}, func(it item) (kafka.Message, error) {
		r := rec(it)
		m := kafka.Message{Value: enc(nil, r)}
		if sp.key != nil {
			k, err := sp.key.eval(r)
			if err != nil {
				return m, fmt.Errorf("%s.key: %w", what, err)
			}
			m.Key = []byte(record.Text(k))
		}
		return m, nil
	})
}

// encoder returns the encoding of records of s in format (json or csv).
func encoder(format string, s record.Schema) func(dst []byte, r record.Record) []byte {
	if format == "csv" {
		return func(dst []byte, r record.Record) []byte { return record.AppendCSV(dst, s, r) }
	}
	return func(dst []byte, r record.Record) []byte { return record.AppendJSON(dst, s, r) }
}

// sqliteTypes and postgresTypes are the column types of the field types.
var (
	sqliteTypes   = map[record.Type]string{record.String: "TEXT", record.Int: "INTEGER", record.Float: "REAL", record.Bool: "INTEGER", record.Time: "TEXT"}
	postgresTypes = map[record.Type]string{record.String: "text", record.Int: "bigint", record.Float: "double precision", record.Bool: "boolean", record.Time: "timestamptz"}
)

// sqlValue returns the SQLite value of a field: times as RFC 3339 text.
func sqlValue(v any) any {
	if t, ok := v.(time.Time); ok {
		return record.Text(t)
	}
	return v
}

// sortedKeys returns rec's field names in order.
func sortedKeys(rec record.Record) []string {
	keys := make([]string, 0, len(rec))
	for k := range rec {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// rejectDead is the sink of a pipeline without dead_letters: a dead letter
// reaching it stops the job with an error naming the record.
type rejectDead struct{ sink.Sink[item] }

// NewWriter returns a writer that rejects dead letters.
func (r rejectDead) NewWriter(ctx context.Context, info sink.WriterInfo) (sink.Writer[item], error) {
	w, err := r.Sink.NewWriter(ctx, info)
	if err != nil {
		return nil, err
	}
	return rejectingWriter{w}, nil
}

// rejectingWriter stops at the first dead letter.
type rejectingWriter struct{ sink.Writer[item] }

// Write writes batch, or fails permanently when it holds a dead letter.
func (w rejectingWriter) Write(ctx context.Context, batch []item) error {
	for _, it := range batch {
		if d := it.dead; d != nil {
			return sink.Permanent(fmt.Errorf("pipeline: a record failed at %s: %s (record %s): fix the input or the pipeline, or add a dead_letters sink to keep such records aside",
				d.stage, d.err, d.value))
		}
	}
	return w.Writer.Write(ctx, batch)
}
