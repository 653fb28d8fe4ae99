package stream

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/internal/runtime"
)

// op is an operator of a test graph: its name and inputs.
func op(name string, inputs ...runtime.Input) runtime.OperatorSpec {
	return runtime.OperatorSpec{Name: name, Parallelism: 1, Inputs: inputs}
}

// fwd, hash and bcast are edges from operator i.
func fwd(i int) runtime.Input   { return runtime.Input{From: i, Partitioning: runtime.Forward} }
func hash(i int) runtime.Input  { return runtime.Input{From: i, Partitioning: runtime.Hash} }
func bcast(i int) runtime.Input { return runtime.Input{From: i, Partitioning: runtime.Broadcast} }

// TestStagesCutAtEveryKeyShuffle plans the stages of graphs of the shapes
// ordinary jobs have, and checks every stage's operators and topics.
func TestStagesCutAtEveryKeyShuffle(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []runtime.OperatorSpec
		want string
	}{
		{"no shuffle: one stage", []runtime.OperatorSpec{op("orders"), op("parse", fwd(0)), op("out", fwd(1))},
			"stage 0: orders, parse, out\n"},
		{"two key changes", []runtime.OperatorSpec{
			op("orders"), op("parse", fwd(0)), op("per-user", hash(1)), op("rekey", fwd(2)), op("per-region", hash(3)), op("out", fwd(4)),
		}, `stage 0: orders, parse → j-per-user-0-repartition
stage 1: per-user, rekey ← j-per-user-0-repartition → j-per-region-0-repartition
stage 2: per-region, out ← j-per-region-0-repartition
`},
		{"a join of two keyed inputs", []runtime.OperatorSpec{
			op("orders"), op("payments"), op("join", hash(0), hash(1)), op("out", fwd(2)),
		}, `stage 0: orders → j-join-0-repartition
stage 1: payments → j-join-1-repartition
stage 2: join, out ← j-join-0-repartition, j-join-1-repartition
`},
		{"a union of a source and a shuffled stream; two sinks", []runtime.OperatorSpec{
			op("orders"), op("count", hash(0)), op("refunds"), op("union-3", fwd(1), fwd(2)), op("out", fwd(3)), op("audit", fwd(1)),
		}, `stage 0: orders → j-count-0-repartition
stage 1: count, refunds, union-3, out, audit ← j-count-0-repartition
`},
		{"a downstream stage whose first operator comes first", []runtime.OperatorSpec{
			op("clicks"), op("orders"), op("keyed", hash(1)), op("union-3", fwd(0), fwd(2)), op("out", fwd(3)),
		}, `stage 0: orders → j-keyed-0-repartition
stage 1: clicks, keyed, union-3, out ← j-keyed-0-repartition
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := runtime.Graph{Job: "j", Operators: tc.ops}
			p, err := planStages(g)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.describe(g); got != tc.want {
				t.Errorf("stages:\n%s\nwant:\n%s", got, tc.want)
			}
			for _, ct := range p.cuts {
				if ct.fromStage >= ct.toStage {
					t.Errorf("cut %s goes from stage %d to stage %d: not in topological order", ct.topic, ct.fromStage, ct.toStage)
				}
			}
		})
	}
}

// TestStagesRefuseWhatATaskCannotRun checks the graphs whose stages would
// give a wrong answer: a broadcast input, and an operator that reads a
// stream both keyed and not.
func TestStagesRefuseWhatATaskCannotRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		ops  []runtime.OperatorSpec
		want string
	}{
		{"broadcast", []runtime.OperatorSpec{op("orders"), op("rules"), op("apply", hash(0), bcast(1))},
			`stream: job "j": operator "apply" reads "rules" broadcast: a job with a broadcast input cannot run in stages yet (every task would see only its own partition of the broadcast stream); run it in one process`},
		{"keyed and not", []runtime.OperatorSpec{op("orders"), op("keyed", hash(0)), op("union-2", fwd(0), fwd(1)), op("again", hash(0), fwd(2))},
			`stream: job "j": operator "keyed" reads "orders" both keyed and, through other operators, not keyed: a task would see only part of the un-keyed side; key both sides, or run the job in one process`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := planStages(runtime.Graph{Job: "j", Operators: tc.ops})
			if err == nil || err.Error() != tc.want {
				t.Errorf("error: %v\nwant: %s", err, tc.want)
			}
		})
	}
}

// TestRepartitionTopicNames checks that topic names are Kafka's legal
// names, derived from the job's and operator's names alone, and distinct
// when those differ only in characters Kafka does not allow.
func TestRepartitionTopicNames(t *testing.T) {
	if got := repartitionTopic("orders", "per-user", 0); got != "orders-per-user-0-repartition" {
		t.Errorf("plain names: %q", got)
	}
	a, b := repartitionTopic("orders per user", "count", 0), repartitionTopic("orders/per/user", "count", 0)
	if a == b || !strings.HasPrefix(a, "orders_per_user-count-0-repartition-") || !strings.HasPrefix(b, "orders_per_user-count-0-repartition-") {
		t.Errorf("names with illegal characters: %q and %q", a, b)
	}
	if a != repartitionTopic("orders per user", "count", 0) {
		t.Error("the same names give another topic")
	}
	long := repartitionTopic(strings.Repeat("j", 300), "count", 1)
	if len(long) > maxTopicLen || long == repartitionTopic(strings.Repeat("j", 301), "count", 1) {
		t.Errorf("a long name: %d characters, or not distinct", len(long))
	}
}

// TestEitherCrossesStagesWhole: the tagged record of a join's or a
// co-process's inputs crosses a stage cut as JSON and comes back from the
// same input with the same value; its check looks into the inputs' types.
func TestEitherCrossesStagesWhole(t *testing.T) {
	type order struct{ ID, User string }
	for _, e := range []either[order, int]{{a: order{"o1", "u"}}, {b: 7, second: true}} {
		data, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		var back either[order, int]
		if err := json.Unmarshal(data, &back); err != nil || back != e {
			t.Errorf("%s came back as %+v (%v), want %+v", data, back, err, e)
		}
	}
	if err := (keyShuffle[string, either[order, int]]{}).check(); err != nil {
		t.Errorf("an either of JSON-safe records: %v", err)
	}
	type hidden struct{ id string }
	err := (keyShuffle[string, either[order, hidden]]{}).check()
	if err == nil || !strings.Contains(err.Error(), ".id is not exported") {
		t.Errorf("an either of a record with an unexported field: %v", err)
	}
}
