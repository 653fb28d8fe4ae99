package pipeline

import (
	"fmt"
	"slices"
	"strings"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/pipeline/internal/config"
	"github.com/exactlyonce/exactly/pipeline/internal/record"
	"github.com/exactlyonce/exactly/pipeline/internal/yamlconf"
)

// deadLettersName is the name outputs read the dead letters by, and the
// sink operator of the dead_letters section.
const deadLettersName = "dead_letters"

// lateSuffix marks the late records of a stream's windowed aggregate:
// orders.late.
const lateSuffix = ".late"

// inputPlan is a checked source: its records' schema, decoder and event
// time.
type inputPlan struct {
	name       string // the source operator's name
	what       string // its section, for messages: "source" or "inputs[1].source"
	decodeWhat string // "decode" or "inputs[1].decode"
	eventWhat  string // "event_time" or "inputs[1].event_time"
	cfg        *config.Source
	decodeCfg  *config.Decode
	eventCfg   *config.EventTime
	schema     record.Schema
	decode     record.Decoder
	generate   []field // the generator's fields
	eventTime  *program
}

// streamPlan is a checked stream: the union of its inputs, transformed.
type streamPlan struct {
	name      string
	what      string // its transforms' prefix, for messages and operator names: "transforms" or "streams[0].transforms"
	aggPrefix string // the default names of its aggregates: "" or "orders."
	from      []string
	fromPos   []yamlconf.Pos
	cfg       []config.Step
	steps     []step
	input     record.Schema
	output    record.Schema
}

// outputPlan is a checked sink and the stream it writes.
type outputPlan struct {
	name   string // the sink operator's name
	what   string // its section: "sink", "dead_letters" or "outputs[2].sink"
	prefix string // of the operators that split records from dead letters before it: "" or "name."
	from   string
	pos    yamlconf.Pos // of from
	sink   *sinkPlan
}

// shape reads the pipeline's inputs, streams and outputs from either form
// of the file: source, transforms and sink, or inputs, streams and
// outputs (each with dead_letters if wanted).
func (p *plan) shape(c *compiler) {
	cfg, doc := p.cfg, p.doc
	if len(cfg.Inputs) == 0 {
		p.shapeSingle(c)
		return
	}
	for _, f := range []struct {
		set  bool
		ptr  any
		name string
		fix  string
	}{
		{cfg.Source != nil, cfg.Source, "source", "move it into inputs as one more input"},
		{cfg.Decode != nil, cfg.Decode, "decode", "give each input its own decode"},
		{cfg.EventTime != nil, cfg.EventTime, "event_time", "give each input its own event_time"},
		{len(cfg.Transforms) > 0, &cfg.Transforms, "transforms", "put them in a stream's transforms"},
		{cfg.Sink != nil, cfg.Sink, "sink", "make it one of outputs"},
	} {
		if f.set {
			c.errorf(doc.Pos(f.ptr), "%s does not go with inputs: %s", f.name, f.fix)
		}
	}
	if len(cfg.Outputs) == 0 && cfg.DeadLetters == nil {
		c.errorf(doc.Pos(&cfg.Inputs), "a pipeline with inputs needs outputs: add \"outputs: [{name: out, from: %s, sink: {kind: file, dir: out}}]\"", cfg.Inputs[0].Name)
	}
	names := map[string]bool{}
	name := func(n string, ptr any, what string) {
		switch {
		case !nameRE.MatchString(n):
			c.errorf(doc.Pos(ptr), "%s.name is %q: use letters, digits and '_', not starting with a digit", what, n)
		case n == deadLettersName:
			c.errorf(doc.Pos(ptr), "%s.name is %q, the name of the dead letters' stream: choose another", what, n)
		case names[n]:
			c.errorf(doc.Pos(ptr), "%s.name is %q, which names another input, stream or output: give each its own name", what, n)
		}
		names[n] = true
	}
	for i := range cfg.Inputs {
		in := &cfg.Inputs[i]
		what := fmt.Sprintf("inputs[%d]", i)
		name(in.Name, &in.Name, what)
		p.inputs = append(p.inputs, &inputPlan{name: in.Name, what: what + ".source", decodeWhat: what + ".decode", eventWhat: what + ".event_time",
			cfg: &in.Source, decodeCfg: in.Decode, eventCfg: in.EventTime})
	}
	for i := range cfg.Streams {
		st := &cfg.Streams[i]
		what := fmt.Sprintf("streams[%d]", i)
		name(st.Name, &st.Name, what)
		sp := &streamPlan{name: st.Name, what: what + ".transforms", aggPrefix: st.Name + ".", from: st.From, cfg: st.Transforms}
		for k := range st.From {
			sp.fromPos = append(sp.fromPos, doc.Pos(&st.From[k]))
		}
		if len(st.From) == 0 {
			c.errorf(doc.Pos(&st.From), "%s.from is empty: name the inputs or streams it reads, such as [%s]", what, cfg.Inputs[0].Name)
		}
		p.streams = append(p.streams, sp)
	}
	for i := range cfg.Outputs {
		o := &cfg.Outputs[i]
		what := fmt.Sprintf("outputs[%d]", i)
		name(o.Name, &o.Name, what)
		p.outputs = append(p.outputs, &outputPlan{name: o.Name, what: what + ".sink", prefix: o.Name + ".", from: o.From, pos: doc.Pos(&o.From), sink: &sinkPlan{cfg: &o.Sink}})
	}
	p.shapeDeadLetters()
}

// shapeSingle reads the form of one source, its transforms and one sink.
func (p *plan) shapeSingle(c *compiler) {
	cfg, doc := p.cfg, p.doc
	for _, f := range []struct {
		set  bool
		ptr  any
		name string
	}{{len(cfg.Streams) > 0, &cfg.Streams, "streams"}, {len(cfg.Outputs) > 0, &cfg.Outputs, "outputs"}} {
		if f.set {
			c.errorf(doc.Pos(f.ptr), "%s needs inputs: replace source, decode and event_time by \"inputs: [{name: in, source: {...}, decode: {...}}]\", or write transforms and a sink instead", f.name)
		}
	}
	if cfg.Source == nil {
		c.errorf(yamlconf.Pos{Line: 1, Col: 1}, "the pipeline has no source: add \"source: {kind: file, paths: [in.jsonl]}\" (or inputs, for several)")
	}
	if cfg.Sink == nil {
		c.errorf(yamlconf.Pos{Line: 1, Col: 1}, "the pipeline has no sink: add \"sink: {kind: file, dir: out}\" (or outputs, for several)")
	}
	if cfg.Source == nil || cfg.Sink == nil {
		return
	}
	p.inputs = []*inputPlan{{name: "source", what: "source", decodeWhat: "decode", eventWhat: "event_time", cfg: cfg.Source, decodeCfg: cfg.Decode, eventCfg: cfg.EventTime}}
	p.streams = []*streamPlan{{name: "transforms", what: "transforms", from: []string{"source"}, fromPos: []yamlconf.Pos{doc.Pos(cfg.Source)}, cfg: cfg.Transforms}}
	p.outputs = []*outputPlan{{name: "sink", what: "sink", from: "transforms", pos: doc.Pos(cfg.Sink), sink: &sinkPlan{cfg: cfg.Sink}}}
	p.shapeDeadLetters()
}

// shapeDeadLetters adds the output of the dead_letters section.
func (p *plan) shapeDeadLetters() {
	if d := p.cfg.DeadLetters; d != nil {
		p.outputs = append(p.outputs, &outputPlan{name: deadLettersName, what: deadLettersName, from: deadLettersName, pos: p.doc.Pos(d), sink: &sinkPlan{cfg: d}})
	}
}

// addNode records an input or a stream, for those that read it.
func (p *plan) addNode(n *node) { p.nodes[n.name] = n }

// resolve returns the node that from names, at pos: an input, a stream
// defined above, or a stream's late records (orders.late). what names the
// reader, for messages.
func (p *plan) resolve(c *compiler, from string, pos yamlconf.Pos, what string) (*node, bool) {
	base, late := strings.CutSuffix(from, lateSuffix)
	n := p.nodes[base]
	if n == nil {
		known := slices.Sorted(func(yield func(string) bool) {
			for k := range p.nodes {
				if !yield(k) {
					return
				}
			}
		})
		for _, sp := range p.streams {
			if sp.name == base {
				c.errorf(pos, "%s reads %q, a stream defined below it: move stream %s above the one that reads it", what, from, base)
				return nil, false
			}
		}
		where := "of the pipeline"
		if strings.HasPrefix(what, "streams[") {
			where = "defined above it (a stream reads only those defined before it)"
		}
		c.errorf(pos, "%s reads %q, which is no input or stream %s%s: use one of %s",
			what, from, where, yamlconf.Suggest(base, known), strings.Join(known, ", "))
		return nil, false
	}
	if !late {
		n.consumers++
		return n, true
	}
	switch {
	case n.windows == 0:
		c.errorf(pos, "%s reads %q, but %s has no windowed aggregate, the only step with late records: read a stream with one", what, from, base)
		return nil, false
	case n.windows > 1:
		c.errorf(pos, "%s reads %q, but stream %s has %d windowed aggregates: late records come from a stream with one; split the stream in two", what, from, base, n.windows)
		return nil, false
	}
	n.lateConsumers++
	return &node{name: from, schema: n.lateSchema, eventTime: true}, true
}

// compileInput compiles an input's source, decoder and event time.
func (p *plan) compileInput(c *compiler, in *inputPlan) {
	p.compileSource(c, in)
	if ec := in.eventCfg; ec != nil {
		if prog, ok := c.compile(in.eventWhat+".field", ec.Field, in.schema, record.Time, record.Int); ok {
			in.eventTime = &prog
		}
		if ec.MaxOutOfOrderness < 0 {
			c.errorf(p.doc.Pos(&ec.MaxOutOfOrderness), "%s.max_out_of_orderness is %v: use 0 or a positive duration", in.eventWhat, ec.MaxOutOfOrderness)
		}
		if ec.IdleTimeout < 0 {
			c.errorf(p.doc.Pos(&ec.IdleTimeout), "%s.idle_timeout is %v: use 0 (never idle) or a positive duration", in.eventWhat, ec.IdleTimeout)
		}
	}
	p.addNode(&node{name: in.name, schema: in.schema, eventTime: in.eventCfg != nil})
}

// compileStream checks a stream's inputs and compiles its transforms.
func (p *plan) compileStream(c *compiler, sp *streamPlan) {
	var first *node
	for i, from := range sp.from {
		what := strings.TrimSuffix(sp.what, ".transforms") + ".from"
		if slices.Contains(sp.from[:i], from) {
			c.errorf(sp.fromPos[i], "%s names %q twice: name each input once", what, from)
			continue
		}
		if from == deadLettersName {
			c.errorf(sp.fromPos[i], "%s: the dead letters go to outputs only: write them with an output of \"from: dead_letters\"", what)
			continue
		}
		n, ok := p.resolve(c, from, sp.fromPos[i], what)
		switch {
		case !ok:
		case first == nil:
			first = n
		case !slices.Equal(n.schema, first.schema):
			c.errorf(sp.fromPos[i], "%s: the records of %s are %s but those of %s are %s: a union needs the same fields, types and order; add a map step to a stream of its own",
				what, from, n.schema.Describe(), first.name, first.schema.Describe())
		case n.eventTime != first.eventTime:
			c.errorf(sp.fromPos[i], "%s: %s has event time and %s has not: give every input of a union event_time, or none", what, map[bool]string{true: from, false: first.name}[n.eventTime], map[bool]string{true: first.name, false: from}[n.eventTime])
		}
	}
	n := &node{name: sp.name}
	if first != nil {
		sp.input, n.eventTime = first.schema, first.eventTime
	}
	sp.output = p.compileSteps(c, sp, n)
	n.schema = sp.output
	p.addNode(n)
}

// compileOutput checks an output's stream and its sink.
func (p *plan) compileOutput(c *compiler, o *outputPlan) {
	if o.from == deadLettersName {
		p.dead = true
		p.checkSink(c, o.sink, o.what, deadLetterSchema)
		return
	}
	what := strings.TrimSuffix(o.what, ".sink") + ".from"
	n, ok := p.resolve(c, o.from, o.pos, what)
	if !ok {
		return
	}
	p.checkSink(c, o.sink, o.what, n.schema)
}

// checkAllRead reports the inputs and streams that nothing reads: their
// records would go nowhere.
func (p *plan) checkAllRead(c *compiler) {
	for i, in := range p.inputs {
		if n := p.nodes[in.name]; n != nil && n.consumers == 0 {
			c.errorf(p.doc.Pos(&p.cfg.Inputs[i]), "input %s is read by no stream or output: add it to a stream's from or an output's, or remove it", in.name)
		}
	}
	for i, sp := range p.streams {
		if n := p.nodes[sp.name]; n != nil && n.consumers == 0 {
			c.errorf(p.doc.Pos(&p.cfg.Streams[i]), "stream %s is read by no stream or output: add an output of \"from: %s\", or remove it", sp.name, sp.name)
		}
	}
}

// clusterConn returns the connection of the group of a pipeline run on a
// cluster: its first input's, every input being a kafka source (a file or
// generator source cannot be split into tasks by partition).
func (p *plan) clusterConn() (kafka.Conn, error) {
	for _, in := range p.inputs {
		if in.cfg.Kind != "kafka" {
			return kafka.Conn{}, p.doc.Errorf(in.cfg, "%s: a %s source cannot run on a cluster, whose tasks are the partitions of kafka topics: read kafka, or run the pipeline without --cluster", in.what, in.cfg.Kind)
		}
	}
	first := p.inputs[0].cfg
	return p.kafkaConn(first.Brokers, first.SASL, first.TLS)
}
