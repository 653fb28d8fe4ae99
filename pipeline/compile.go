package pipeline

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/pipeline/internal/config"
	"github.com/exactlyonce/exactly/pipeline/internal/record"
	"github.com/exactlyonce/exactly/pipeline/internal/yamlconf"
	"github.com/exactlyonce/exactly/state"
)

// maxParallelism is the engine's default number of key groups, which
// bounds every operator's parallelism.
const maxParallelism = 128

// plan is a checked pipeline: its inputs, streams and outputs with their
// schemas and compiled expressions. A file of one source, transforms and
// one sink is the plan of one input, one stream and one or two outputs.
type plan struct {
	cfg      *config.Pipeline // as decoded: doc knows the positions of its fields
	doc      *yamlconf.Document
	inputs   []*inputPlan
	streams  []*streamPlan
	outputs  []*outputPlan
	nodes    map[string]*node // inputs and streams by name
	dead     bool             // an output writes the dead letters
	checking bool             // build only checks the connectors' options: no I/O
}

// node is what streams and outputs read: an input or a stream.
type node struct {
	name          string
	schema        record.Schema // its records
	eventTime     bool          // its records carry event time
	windows       int           // its windowed aggregates
	lateSchema    record.Schema // the records of its windowed aggregate, late or not
	consumers     int           // the streams and outputs reading it
	lateConsumers int           // those reading its late records
}

// field is a named expression: a generated field or a mapped one.
type field struct {
	name string
	prog program
}

// step is one transform.
type step struct {
	what   string // "transforms[2].map", for dead letters
	filter *program
	fields []field        // map
	schema record.Schema  // map: the output
	agg    *aggregatePlan // key_by with its aggregate
}

// describe says what the step does, in one line.
func (st step) describe() string {
	switch {
	case st.filter != nil:
		return "keep the records where " + st.filter.src
	case st.agg != nil:
		a := st.agg
		per := "per key " + a.key.src
		if w := a.window; w != nil {
			per += ", per " + w.Kind + " window"
		}
		names := make([]string, len(a.values))
		for i, v := range a.values {
			names[i] = v.name + " " + v.fn
		}
		return "aggregate " + per + ": " + strings.Join(names, ", ")
	}
	return "map to " + st.schema.Describe()
}

// aggregatePlan is a key_by and the aggregate that follows it.
type aggregatePlan struct {
	name    string
	key     program
	values  []aggValue
	window  *config.Window
	output  record.Schema
	keyType record.Type
}

// aggValue is one aggregate of an aggregation.
type aggValue struct {
	name string
	fn   string   // count, sum, min, max, avg
	arg  *program // nil for count
	typ  record.Type
}

// compile checks the semantics of a decoded pipeline and compiles its
// expressions.
func compile(cfg *config.Pipeline, doc *yamlconf.Document) (*plan, error) {
	c := &compiler{file: doc.File}
	p := &plan{cfg: cfg, doc: doc, nodes: map[string]*node{}}
	p.cfg.Checkpoint.Storage = strings.ReplaceAll(p.cfg.Checkpoint.Storage, "{name}", p.cfg.Name)
	p.cfg.Cluster.Group = strings.ReplaceAll(p.cfg.Cluster.Group, "{name}", p.cfg.Name)
	p.shape(c)
	p.resolvePaths()
	p.checkLimits(c)
	p.checkPaths(c)
	for _, in := range p.inputs {
		p.compileInput(c, in)
	}
	for _, sp := range p.streams {
		p.compileStream(c, sp)
	}
	for _, o := range p.outputs {
		p.compileOutput(c, o)
	}
	if len(c.errs) == 0 { // else a misspelt name makes its input look unread
		p.checkAllRead(c)
	}
	if len(c.errs) > 0 {
		return nil, c.errs
	}
	return p, nil
}

// compileSteps compiles the transforms of sp, whose records are sp.input,
// into sp.steps, and returns the schema they make. n is the stream's
// node: it learns of the windowed aggregates.
func (p *plan) compileSteps(c *compiler, sp *streamPlan, n *node) record.Schema {
	doc, steps, s := p.doc, sp.cfg, sp.input
	for i := 0; i < len(steps); i++ {
		what := fmt.Sprintf("%s[%d]", sp.what, i)
		st := &steps[i]
		switch {
		case doc.Has(&st.Filter):
			if prog, ok := c.compile(what+".filter", st.Filter, s, record.Bool); ok {
				sp.steps = append(sp.steps, step{what: what + ".filter", filter: &prog})
			}
		case doc.Has(&st.Map):
			fields, out := p.compileFields(c, what+".map", st.Map, doc.Pos(&st.Map), s)
			sp.steps = append(sp.steps, step{what: what + ".map", fields: fields, schema: out})
			s = out
		case doc.Has(&st.KeyBy):
			if i+1 >= len(steps) || steps[i+1].Aggregate == nil {
				c.errorf(doc.Pos(&st.KeyBy), "%s.key_by must be followed by an aggregate step: add \"- aggregate: {values: {n: count()}}\" after it", what)
				continue
			}
			agg := p.compileAggregate(c, sp, i, s, n.eventTime)
			i++
			if agg != nil {
				sp.steps = append(sp.steps, step{what: fmt.Sprintf("%s[%d].aggregate", sp.what, i), agg: agg})
				if agg.window != nil {
					n.windows++
					n.lateSchema = s
				}
				s = agg.output
			}
		case st.Aggregate != nil:
			c.errorf(doc.Pos(st.Aggregate), "%s.aggregate must follow a key_by step: add \"- key_by: <expression>\" before it", what)
		}
	}
	return s
}

// checkLimits checks the numeric options the decoder cannot.
func (p *plan) checkLimits(c *compiler) {
	cfg, doc := p.cfg, p.doc
	par := func(v *int, what string, zeroOK bool) {
		if *v < 0 || *v > maxParallelism || *v == 0 && !zeroOK {
			c.errorf(doc.Pos(v), "%s is %d: use 1 to %d", what, *v, maxParallelism)
		}
	}
	par(&cfg.Parallelism, "parallelism", false)
	for _, in := range p.inputs {
		par(&in.cfg.Parallelism, in.what+".parallelism", true)
		if in.cfg.Kind == "generator" && (in.cfg.Splits < 1 || in.cfg.Splits > 1<<16) {
			c.errorf(doc.Pos(&in.cfg.Splits), "%s.splits is %d: use 1 to 65536", in.what, in.cfg.Splits)
		}
		if in.cfg.Rate < 0 {
			c.errorf(doc.Pos(&in.cfg.Rate), "%s.rate is %v: use 0 (as fast as possible) or a positive rate", in.what, in.cfg.Rate)
		}
	}
	for _, o := range p.outputs {
		par(&o.sink.cfg.Parallelism, o.what+".parallelism", true)
	}
	if cfg.Checkpoint.Interval <= 0 {
		c.errorf(doc.Pos(&cfg.Checkpoint.Interval), "checkpoint.interval is %v: use a positive duration such as 1s", cfg.Checkpoint.Interval)
	}
	cl := &cfg.Cluster
	for _, d := range []struct {
		v    *time.Duration
		what string
	}{{&cl.SessionTimeout, "cluster.session_timeout"}, {&cl.OwnershipLease, "cluster.ownership_lease"}} {
		if *d.v <= 0 {
			c.errorf(doc.Pos(d.v), "%s is %v: use a positive duration such as 10s", d.what, *d.v)
		}
	}
	if m := cfg.State.Memory; m != 0 && int64(m)<<20 < state.MinMemoryBudget {
		c.errorf(doc.Pos(&cfg.State.Memory), "state.memory_mib is %d: use at least %d, or leave it out for 256 MiB per keyed subtask", m, state.MinMemoryBudget>>20)
	}
	if cl.StagePause < 0 {
		c.errorf(doc.Pos(&cl.StagePause), "cluster.stage_pause is %v: use 0 (a tenth of checkpoint.interval) or a positive duration", cl.StagePause)
	}
	if cl.RepartitionPartitions < 0 || cl.RepartitionPartitions > maxParallelism {
		c.errorf(doc.Pos(&cl.RepartitionPartitions), "cluster.repartition_partitions is %d: use 0 (the most partitions of the input topics) or 1 to %d", cl.RepartitionPartitions, maxParallelism)
	}
	if cfg.Checkpoint.DebloatTarget < 0 {
		c.errorf(doc.Pos(&cfg.Checkpoint.DebloatTarget), "checkpoint.debloat_target is %v: use 0 (off) or a positive duration such as 200ms", cfg.Checkpoint.DebloatTarget)
	}
	if cfg.Checkpoint.Timeout <= 0 {
		c.errorf(doc.Pos(&cfg.Checkpoint.Timeout), "checkpoint.timeout is %v: use a positive duration such as 1m", cfg.Checkpoint.Timeout)
	}
	if cfg.Checkpoint.RequestTimeout <= 0 {
		c.errorf(doc.Pos(&cfg.Checkpoint.RequestTimeout), "checkpoint.request_timeout is %v: use a positive duration such as 30s", cfg.Checkpoint.RequestTimeout)
	}
	if cfg.Checkpoint.MinTransferRate <= 0 {
		c.errorf(doc.Pos(&cfg.Checkpoint.MinTransferRate), "checkpoint.min_transfer_rate is %d: use a positive number of bytes per second such as 1048576 (1 MiB/s)", cfg.Checkpoint.MinTransferRate)
	}
	if cfg.Checkpoint.Retained < 1 {
		c.errorf(doc.Pos(&cfg.Checkpoint.Retained), "checkpoint.retained is %d: keep at least 1 checkpoint", cfg.Checkpoint.Retained)
	}
	if cfg.Restart.MaxAttempts < -1 || cfg.Restart.MaxAttempts == 0 {
		c.errorf(doc.Pos(&cfg.Restart.MaxAttempts), "restart.max_attempts is %d: use a positive count, or -1 for no restarts", cfg.Restart.MaxAttempts)
	}
	if cfg.Restart.InitialBackoff <= 0 {
		c.errorf(doc.Pos(&cfg.Restart.InitialBackoff), "restart.initial_backoff is %v: use a positive duration such as 100ms", cfg.Restart.InitialBackoff)
	}
	if cfg.Restart.MaxBackoff < cfg.Restart.InitialBackoff {
		c.errorf(doc.Pos(&cfg.Restart.MaxBackoff), "restart.max_backoff is %v, less than restart.initial_backoff (%v): use at least that, such as 10s", cfg.Restart.MaxBackoff, cfg.Restart.InitialBackoff)
	}
	if cfg.Checkpoint.Storage == "" {
		c.errorf(doc.Pos(&cfg.Checkpoint.Storage), "checkpoint.storage is empty: name a directory or an s3:// URL")
	}
}

// compileSource sets the input's schema: the generator's fields, or the
// decoder's.
func (p *plan) compileSource(c *compiler, in *inputPlan) {
	doc, src := p.doc, in.cfg
	if src.Kind == "generator" {
		if in.decodeCfg != nil {
			c.errorf(doc.Pos(in.decodeCfg), "%s does not apply to a generator source, which makes records from its fields: remove it", in.decodeWhat)
		}
		in.generate, in.schema = p.compileFields(c, in.what+".fields", src.Fields, doc.Pos(&src.Fields), record.Schema{{Name: "index", Type: record.Int}})
		return
	}
	d := in.decodeCfg
	if d == nil {
		c.errorf(doc.Pos(src), "a %s source needs a %s section: add \"decode: {format: json, fields: {...}}\" (or csv, raw)", src.Kind, in.decodeWhat)
		return
	}
	if d.Format == "raw" {
		in.schema, in.decode = record.RawSchema, record.Raw()
		return
	}
	seen := map[string]bool{}
	for _, e := range d.Fields {
		t, ok := record.ParseType(e.Value.Value)
		if !ok {
			c.errorf(e.Value.Pos, "%s.fields.%s is %q: use one of %s", in.decodeWhat, e.Key, e.Value.Value, strings.Join(record.TypeNames, ", "))
			continue
		}
		if !checkName(c, e, seen, in.decodeWhat+".fields") {
			continue
		}
		in.schema = append(in.schema, record.Field{Name: e.Key, Type: t})
	}
	if len(d.Fields) == 0 {
		c.errorf(doc.Pos(&d.Fields), "%s.fields is empty: list the record's fields, such as {user: string, amount: int}", in.decodeWhat)
	}
	if d.Format == "json" {
		in.decode = record.JSON(in.schema, d.Strict)
	} else {
		in.decode = record.CSV(in.schema)
	}
}

// nameRE matches the field names expressions can refer to.
var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// checkName checks a field name and that it is new.
func checkName(c *compiler, e yamlconf.Entry, seen map[string]bool, what string) bool {
	switch {
	case !nameRE.MatchString(e.Key):
		c.errorf(e.KeyPos, "%s: field name %q is not a name expressions can use: use letters, digits and '_', not starting with a digit", what, e.Key)
		return false
	case seen[e.Key]:
		c.errorf(e.KeyPos, "%s: field %q is given twice: name each field once", what, e.Key)
		return false
	}
	seen[e.Key] = true
	return true
}

// compileFields compiles a mapping of names to expressions of records of
// schema in, and returns the fields and the schema they make.
func (p *plan) compileFields(c *compiler, what string, es yamlconf.Entries, pos yamlconf.Pos, in record.Schema) ([]field, record.Schema) {
	var fields []field
	var out record.Schema
	seen := map[string]bool{}
	for _, e := range es {
		if !checkName(c, e, seen, what) {
			continue
		}
		if prog, ok := c.compile(what+"."+e.Key, e.Value, in); ok {
			fields = append(fields, field{name: e.Key, prog: prog})
			out = append(out, record.Field{Name: e.Key, Type: prog.typ})
		}
	}
	if len(es) == 0 {
		c.errorf(pos, "%s is empty: give at least one field, such as \"%s: %s\"", what, example(in), example(in))
	}
	return fields, out
}

// aggRE matches an aggregation: fn(argument).
var aggRE = regexp.MustCompile(`^\s*(count|sum|min|max|avg)\s*\((.*)\)\s*$`)

// compileAggregate compiles the key_by of sp's step i and the aggregate
// of step i+1, of records of schema s; eventTime tells whether they carry
// event time.
func (p *plan) compileAggregate(c *compiler, sp *streamPlan, i int, s record.Schema, eventTime bool) *aggregatePlan {
	keyStep, aggStep := &sp.cfg[i], &sp.cfg[i+1]
	a := aggStep.Aggregate
	what := fmt.Sprintf("%s[%d].aggregate", sp.what, i+1)
	key, ok := c.compile(fmt.Sprintf("%s[%d].key_by", sp.what, i), keyStep.KeyBy, s, record.String, record.Int, record.Bool)
	ap := &aggregatePlan{name: a.Name, key: key, window: a.Window, keyType: key.typ}
	if ap.name == "" {
		ap.name = fmt.Sprintf("%saggregate-%d", sp.aggPrefix, i+1)
	}
	ap.output = record.Schema{{Name: "key", Type: key.typ}}
	if a.Window != nil {
		p.checkWindow(c, a.Window, what+".window", eventTime)
		ap.output = append(ap.output, record.Field{Name: "window_start", Type: record.Time}, record.Field{Name: "window_end", Type: record.Time})
	}
	seen := map[string]bool{}
	for _, f := range ap.output {
		seen[f.Name] = true
	}
	for _, e := range a.Values {
		if !checkName(c, e, seen, what+".values") {
			continue
		}
		m := aggRE.FindStringSubmatch(e.Value.Value)
		if m == nil {
			c.errorf(e.Value.Pos, "%s.values.%s is %q: write count(), sum(e), min(e), max(e) or avg(e) with e an expression of the record", what, e.Key, e.Value.Value)
			continue
		}
		v := aggValue{name: e.Key, fn: m[1], typ: record.Int}
		open := strings.Index(e.Value.Value, "(") + 1
		argText := e.Value.Sub(open, open+len(m[2]))
		switch {
		case v.fn == "count" && strings.TrimSpace(m[2]) != "":
			c.errorf(argText.Pos, "%s.values.%s: count takes no argument: write count()", what, e.Key)
			continue
		case v.fn != "count":
			arg, ok := c.compile(what+".values."+e.Key, argText, s, record.Int, record.Float)
			if !ok {
				continue
			}
			v.arg, v.typ = &arg, arg.typ
			if v.fn == "avg" {
				v.typ = record.Float
			}
		}
		ap.values = append(ap.values, v)
		ap.output = append(ap.output, record.Field{Name: e.Key, Type: v.typ})
	}
	if len(a.Values) == 0 {
		c.errorf(p.doc.Pos(&a.Values), "%s.values is empty: give at least one aggregate, such as \"n: count()\"", what)
	}
	if !ok {
		return nil
	}
	return ap
}

// checkWindow checks a window's durations.
func (p *plan) checkWindow(c *compiler, w *config.Window, what string, eventTime bool) {
	if !eventTime {
		c.errorf(p.doc.Pos(w), "%s needs event time: add \"event_time: {field: <expression>}\" to %s", what, map[bool]string{true: "the pipeline", false: "each input of the stream"}[p.cfg.Source != nil])
	}
	check := func(v int64, ptr any, name string, kinds ...string) {
		if slices.Contains(kinds, w.Kind) && v <= 0 {
			c.errorf(p.doc.Pos(ptr), "%s.%s is %v: use a positive duration such as 1m", what, name, time.Duration(v))
		}
	}
	check(int64(w.Size), &w.Size, "size", "tumbling", "sliding")
	check(int64(w.Slide), &w.Slide, "slide", "sliding")
	check(int64(w.Gap), &w.Gap, "gap", "session")
	if w.AllowedLateness < 0 {
		c.errorf(p.doc.Pos(&w.AllowedLateness), "%s.allowed_lateness is %v: use 0 or a positive duration", what, w.AllowedLateness)
	}
}
