package pipeline

import (
	"strings"
	"testing"
	"time"
)

// env is the environment of the tests' pipelines.
func env(name string) (string, bool) {
	v, ok := map[string]string{"TOPIC": "orders", "SECRET": "hunter2"}[name]
	return v, ok
}

// TestErrorsNamePositionAndFix parses bad pipelines and checks each
// error, its file:line:col and its message, exactly.
func TestErrorsNamePositionAndFix(t *testing.T) {
	for _, tc := range badPipelines {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("p.yaml", []byte(strings.TrimPrefix(tc.yaml, "\n")), env)
			if err == nil {
				t.Fatalf("no error, want\n%s", tc.want)
			}
			if got := err.Error(); got != tc.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// badPipelines are pipelines with one problem each, and the exact error.
var badPipelines = []struct {
	name, yaml, want string
}{
	{"tls ca_file missing", `
name: x
source: {kind: kafka, brokers: ["a:1"], topics: [t], tls: {ca_file: missing-ca.crt}}
decode: {format: raw}
sink: {kind: file, dir: out}
`,
		`p.yaml:2:69: tls.ca_file: open missing-ca.crt: no such file or directory: give the PEM file of the CA that signed the brokers' certificates`},
	{"tls cert without key", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: kafka, brokers: ["a:1"], topic: t, tls: {cert_file: client.crt}}
`,
		`p.yaml:3:66: tls.cert_file is given without tls.key_file: give the certificate's private key too`},
	{"reproduce_aborted without transactions", `
name: x
guarantee: at_least_once
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: kafka, brokers: ["a:1"], topic: t, reproduce_aborted: true}
`,
		`p.yaml:4:8: sink: kafka: SinkOptions.ReproduceAborted = true is invalid: use it with Guarantee ExactlyOnce: only transactions are aborted`},
	{"transaction_timeout below 3 intervals", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
checkpoint: {interval: 1s}
sink: {kind: kafka, brokers: ["a:1"], topic: t, transaction_timeout: 2s, reproduce_aborted: true}
`,
		`p.yaml:4:8: sink: kafka: SinkOptions.TransactionTimeout = 2s is invalid: use at least 3 checkpoint intervals (3s), better the longest outage the job must survive`},
	{"source with inputs", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
inputs:
  - {name: a, source: {kind: generator, count: 1, fields: {a: index}}}
outputs:
  - {name: o, from: a, sink: {kind: file, dir: out}}
`,
		`p.yaml:2:10: source does not go with inputs: move it into inputs as one more input`},
	{"misspelt stream name", `
name: x
inputs:
  - {name: orders, source: {kind: generator, count: 1, fields: {a: index}}}
streams:
  - {name: all, from: [orders]}
outputs:
  - {name: o, from: al, sink: {kind: file, dir: out}}
`,
		`p.yaml:7:21: outputs[0].from reads "al", which is no input or stream of the pipeline (did you mean "all"?): use one of all, orders`},
	{"stream reads one below it", `
name: x
inputs:
  - {name: a, source: {kind: generator, count: 1, fields: {a: index}}}
streams:
  - {name: s, from: [t]}
  - {name: t, from: [a]}
outputs:
  - {name: o, from: s, sink: {kind: file, dir: out}}
`,
		`p.yaml:5:22: streams[0].from reads "t", a stream defined below it: move stream t above the one that reads it`},
	{"union of different records", `
name: x
inputs:
  - {name: orders, source: {kind: generator, count: 1, fields: {a: index}}}
  - {name: refunds, source: {kind: generator, count: 1, fields: {b: index}}}
streams:
  - {name: all, from: [orders, refunds]}
outputs:
  - {name: o, from: all, sink: {kind: file, dir: out}}
`,
		`p.yaml:6:32: streams[0].from: the records of refunds are b (int) but those of orders are a (int): a union needs the same fields, types and order; add a map step to a stream of its own`},
	{"union with and without event time", `
name: x
inputs:
  - {name: a, source: {kind: generator, count: 1, fields: {a: index}}, event_time: {field: a}}
  - {name: b, source: {kind: generator, count: 1, fields: {a: index}}}
streams:
  - {name: s, from: [a, b]}
outputs:
  - {name: o, from: s, sink: {kind: file, dir: out}}
`,
		`p.yaml:6:25: streams[0].from: a has event time and b has not: give every input of a union event_time, or none`},
	{"input read by nothing", `
name: x
inputs:
  - {name: a, source: {kind: generator, count: 1, fields: {a: index}}}
  - {name: b, source: {kind: generator, count: 1, fields: {a: index}}}
outputs:
  - {name: o, from: a, sink: {kind: file, dir: out}}
`,
		`p.yaml:4:6: input b is read by no stream or output: add it to a stream's from or an output's, or remove it`},
	{"dead letters into a stream, late records without a window", `
name: x
inputs:
  - {name: a, source: {kind: generator, count: 1, fields: {a: index}}}
streams:
  - {name: s, from: [a, dead_letters]}
outputs:
  - {name: o, from: s.late, sink: {kind: file, dir: out}}
`,
		`p.yaml:5:25: streams[0].from: the dead letters go to outputs only: write them with an output of "from: dead_letters"
p.yaml:7:21: outputs[0].from reads "s.late", but s has no windowed aggregate, the only step with late records: read a stream with one`},
	{"names", `
name: x
inputs:
  - {name: a, source: {kind: generator, count: 1, fields: {a: index}}}
  - {name: a, source: {kind: generator, count: 1, fields: {a: index}}}
outputs:
  - {name: o-1, from: a, sink: {kind: file, dir: out}}
`,
		`p.yaml:4:12: inputs[1].name is "a", which names another input, stream or output: give each its own name
p.yaml:6:12: outputs[0].name is "o-1": use letters, digits and '_', not starting with a digit`},
	{"yaml syntax", `
name: x
source: {kind: generator
`,
		`p.yaml:2:9: YAML syntax: could not find flow mapping end token '}': fix the YAML (indentation, quotes, a missing ':')`},
	{"restart without restarts", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: file, dir: out}
restart: {max_attempts: 0}
`,
		`p.yaml:4:25: restart.max_attempts is 0: use a positive count, or -1 for no restarts`},
	{"unknown top-level field", `
name: x
sorce: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: file, dir: out}
`,
		`p.yaml:2:1: unknown field "sorce" in the pipeline (did you mean "source"?): use one of name, parallelism, guarantee, source, decode, event_time, transforms, sink, dead_letters, inputs, streams, outputs, checkpoint, state, restart, cluster`},
	{"unknown field in source", `
name: x
source:
  kind: generator
  count: 1
  fields: {a: index}
  topic: t
sink: {kind: file, dir: out}
`,
		`p.yaml:6:3: unknown field "topic" in source (did you mean "topics"?): use one of kind, brokers, topics, start, bounded, sasl, tls, paths, count, splits, rate, fields, parallelism`},
	{"wrong type", `
name: x
parallelism: many
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: file, dir: out}
`,
		`p.yaml:2:14: parallelism is "many": not an integer of 64 bits: write a whole number such as 10`},
	{"missing required field", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
`,
		`p.yaml:1:1: the pipeline has no sink: add "sink: {kind: file, dir: out}" (or outputs, for several)`},
	{"missing field of the kind", `
name: x
source:
  kind: kafka
  brokers: [localhost:9092]
decode: {format: raw}
sink: {kind: file, dir: out}
`,
		`p.yaml:3:3: source lacks required field "topics" (kind kafka): add it, such as "topics: [orders]"`},
	{"unknown source kind", `
name: x
source: {kind: kafak, topics: [t]}
sink: {kind: file, dir: out}
`,
		`p.yaml:2:16: source.kind is "kafak": use one of kafka, file, generator (did you mean "kafka"?)`},
	{"unknown sink kind", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: mysql, table: t}
`,
		`p.yaml:3:14: sink.kind is "mysql": use one of kafka, postgres, file, sqlite`},
	{"expression does not compile", `
name: x
source: {kind: generator, count: 1, fields: {amount: index}}
transforms:
  - filter: amount >
sink: {kind: file, dir: out}
`,
		`p.yaml:4:20: transforms[0].filter: unexpected token EOF: the record's fields are amount (int) (see https://expr-lang.org/docs/language-definition)`},
	{"unknown name in expression", `
name: x
source: {kind: generator, count: 1, fields: {amount: index}}
transforms:
  - filter: "amount > 1 && amont < 5"
sink: {kind: file, dir: out}
`,
		`p.yaml:4:28: transforms[0].filter: unknown name amont: the record's fields are amount (int) (see https://expr-lang.org/docs/language-definition)`},
	{"filter of the wrong type", `
name: x
source: {kind: generator, count: 1, fields: {amount: index}}
transforms:
  - filter: amount + 1
sink: {kind: file, dir: out}
`,
		`p.yaml:4:13: transforms[0].filter: "amount + 1" is an int: it must be a bool`},
	{"mismatched types in a block expression", `
name: x
source: {kind: generator, count: 1, fields: {amount: index}}
transforms:
  - map:
      label: |
        "n" +
          amount
sink: {kind: file, dir: out}
`,
		`p.yaml:6:13: transforms[0].map.label: invalid operation: + (mismatched types string and int): the record's fields are amount (int) (see https://expr-lang.org/docs/language-definition)`},
	{"missing environment variable", `
name: x
source: {kind: kafka, brokers: ["localhost:9092"], topics: ["${TOPIC}", "${NOPE}"]}
decode: {format: raw}
sink: {kind: file, dir: out}
`,
		`p.yaml:2:73: source.topics[1]: environment variable NOPE is not set: export it, or write ${NOPE:-default}`},
	{"secret not shown", `
name: x
parallelism: ${SECRET}
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: file, dir: out}
`,
		`p.yaml:2:14: parallelism is "${SECRET}" (after substitution from the environment): not an integer of 64 bits: write a whole number such as 10`},
	{"key_by without aggregate", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
transforms:
  - key_by: a
sink: {kind: file, dir: out}
`,
		`p.yaml:4:13: transforms[0].key_by must be followed by an aggregate step: add "- aggregate: {values: {n: count()}}" after it`},
	{"window without event time", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
transforms:
  - key_by: a
  - aggregate:
      window: {kind: tumbling, size: 1m}
      values: {n: count()}
sink: {kind: file, dir: out}
`,
		`p.yaml:6:16: transforms[1].aggregate.window needs event time: add "event_time: {field: <expression>}" to the pipeline`},
	{"field of another kind", `
name: x
source: {kind: generator, count: 1, fields: {a: index}, paths: [in.txt]}
sink: {kind: file, dir: out}
`,
		`p.yaml:2:57: source.paths applies to kind file only, not to kind "generator": remove it`},
	{"bad duration", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: file, dir: out}
checkpoint: {interval: fast}
`,
		`p.yaml:4:24: checkpoint.interval is "fast": not a duration: write a number with a unit, such as 500ms, 10s or 5m`},
	{"negative debloat target", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: file, dir: out}
checkpoint: {debloat_target: -200ms}
`,
		`p.yaml:4:30: checkpoint.debloat_target is -200ms: use 0 (off) or a positive duration such as 200ms`},
	{"negative idle timeout", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
event_time: {field: a, idle_timeout: -5s}
sink: {kind: file, dir: out}
`,
		`p.yaml:3:38: event_time.idle_timeout is -5s: use 0 (never idle) or a positive duration`},
	{"a Pebble memory budget below the minimum", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: file, dir: out}
state: {backend: pebble, dir: st, memory_mib: 2}
`,
		`p.yaml:4:47: state.memory_mib is 2: use at least 4, or leave it out for 256 MiB per keyed subtask`},
	{"a Pebble memory budget on the heap", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: file, dir: out}
state: {backend: heap, memory_mib: 64}
`,
		`p.yaml:4:24: state.memory_mib applies to backend pebble only, not to backend "heap": remove it`},
	{"a cluster session timeout of zero", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: file, dir: out}
cluster: {session_timeout: 0s}
`,
		`p.yaml:4:28: cluster.session_timeout is 0s: use a positive duration such as 10s`},
	{"unknown aggregation", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
transforms:
  - key_by: a % 2
  - aggregate:
      values: {n: total(a)}
sink: {kind: file, dir: out}
`,
		`p.yaml:6:19: transforms[1].aggregate.values.n is "total(a)": write count(), sum(e), min(e), max(e) or avg(e) with e an expression of the record`},
	{"aggregate argument of the wrong type", `
name: x
source: {kind: generator, count: 1, fields: {a: index, s: string(index)}}
transforms:
  - key_by: a % 2
  - aggregate:
      values: {n: sum(s + "x")}
sink: {kind: file, dir: out}
`,
		`p.yaml:6:23: transforms[1].aggregate.values.n: "s + \"x\"" is a string: it must be an int or a float`},
	{"file source without decode", `
name: x
source: {kind: file, paths: [testdata/in.txt]}
sink: {kind: file, dir: out}
`,
		`p.yaml:2:10: a file source needs a decode section: add "decode: {format: json, fields: {...}}" (or csv, raw)`},
	{"unknown field type", `
name: x
source: {kind: file, paths: [testdata/in.txt]}
decode: {format: json, fields: {amount: integer}}
sink: {kind: file, dir: out}
`,
		`p.yaml:3:41: decode.fields.amount is "integer": use one of string, int, float, bool, time`},
	{"missing input file", `
name: x
source: {kind: file, paths: [testdata/in.txt, testdata/missing.csv]}
decode: {format: raw}
sink: {kind: file, dir: out}
`,
		`p.yaml:2:47: source.paths[1]: testdata/missing.csv does not exist: give the path of an existing file (a relative path is relative to the pipeline file's directory, .)`},
	{"output directory under a file", `
name: x
source: {kind: file, paths: [testdata/in.txt]}
decode: {format: raw}
sink: {kind: file, dir: testdata/in.txt/out}
dead_letters: {kind: sqlite, path: testdata/in.txt/dead.db, table: dead}
checkpoint: {storage: testdata/in.txt/checkpoints}
`,
		`p.yaml:4:25: sink.dir: testdata/in.txt/out cannot be created: testdata/in.txt is not a directory: give the path of a directory
p.yaml:5:36: dead_letters.path: the database's directory: testdata/in.txt is not a directory: give the path of a directory
p.yaml:6:23: checkpoint.storage: testdata/in.txt/checkpoints cannot be created: testdata/in.txt is not a directory: give the path of a directory`},
	{"a string for a list", `
name: x
source: {kind: file, paths: in.txt}
decode: {format: raw}
sink: {kind: file, dir: out}
`,
		`p.yaml:2:29: source.paths must be a list: write [a, b] or one "- item" per line`},
	{"upsert without primary key", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: postgres, dsn: "postgres://localhost/db", table: t, mode: upsert}
`,
		`p.yaml:3:72: sink.mode is upsert but primary_key is empty: list the fields that identify a row, such as [a]`},
	{"two steps in one item", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
transforms:
  - filter: a > 1
    map: {b: a}
sink: {kind: file, dir: out}
`,
		`p.yaml:5:5: transforms[0] has both filter and map: give each its own list item`},
	{"duplicate key", `
name: x
name: y
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: file, dir: out}
`,
		`p.yaml:2:1: YAML syntax: mapping key "name" already defined at [1:1]: fix the YAML (indentation, quotes, a missing ':')`},
	{"connector option", `
name: x
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: sqlite, path: "file:x.db", table: t}
`,
		`p.yaml:3:8: sink: sqlite: Options.Path is "file:x.db": use a file path without '?' and without a file: prefix`},
}

// TestSecretsStayOutOfErrors checks that a password given through the
// environment appears in no error, whether the decoder or a connector
// rejects the value holding it.
func TestSecretsStayOutOfErrors(t *testing.T) {
	for _, src := range []string{
		"name: x\nsource: {kind: generator, count: 1, fields: {a: index}}\nsink: {kind: postgres, dsn: \"postgres://u:${SECRET}@host:notaport/db\", table: t}\n",
		"name: x\nsource: {kind: generator, count: 1, fields: {a: index}}\nsink: {kind: postgres, dsn: \"host=x password=${SECRET} port=zz\", table: t}\n",
		"name: x\nsource: {kind: kafka, brokers: [\"a:1\"], topics: [t], sasl: {mechanism: PLAIN, user: u, password: \"${SECRET}\"}}\ndecode: {format: raw}\nsink: {kind: file, dir: out, parallelism: \"${SECRET}\"}\n",
	} {
		_, err := Parse("p.yaml", []byte(src), env)
		if err == nil {
			t.Fatalf("no error for\n%s", src)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}

// TestCheckpointOptionsReachTheEngine checks that the checkpoint section's
// settings are the engine's options of a run.
func TestCheckpointOptionsReachTheEngine(t *testing.T) {
	p, err := Parse("p.yaml", []byte(`
name: x
source: {kind: generator, count: 1, fields: {a: index}}
sink: {kind: file, dir: out}
checkpoint: {interval: 25ms, timeout: 5s, retained: 2, debloat_target: 50ms}
`), env)
	if err != nil {
		t.Fatal(err)
	}
	o := p.options(RunOptions{})
	if o.CheckpointInterval != 25*time.Millisecond || o.CheckpointTimeout != 5*time.Second || o.RetainedCheckpoints != 2 || o.DebloatTarget != 50*time.Millisecond {
		t.Errorf("options: interval %v, timeout %v, retained %d, debloat target %v; want 25ms, 5s, 2, 50ms", o.CheckpointInterval, o.CheckpointTimeout, o.RetainedCheckpoints, o.DebloatTarget)
	}
}
