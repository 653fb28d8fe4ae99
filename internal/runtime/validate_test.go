package runtime

import (
	"context"
	"strings"
	"testing"
)

// TestValidateSideOutputs: an edge must read an output its producer has,
// and sources have no side outputs.
func TestValidateSideOutputs(t *testing.T) {
	newSource := func(context.Context, OperatorContext, Emitter) (SourceOperator, error) { return nil, nil }
	newOp := func(context.Context, OperatorContext, Emitter) (Operator, error) { return nil, nil }
	router := func(context.Context, []chan<- Message, int, int) Router { return nil }
	graph := func(sourceSides, procSides, output int) Graph {
		return Graph{Job: "j", Operators: []OperatorSpec{
			{Name: "src", Parallelism: 1, NewSource: newSource, SideOutputs: sourceSides},
			{Name: "proc", Parallelism: 1, New: newOp, SideOutputs: procSides, Inputs: []Input{{From: 0, NewRouter: router}}},
			{Name: "sink", Parallelism: 1, New: newOp, Inputs: []Input{{From: 1, Output: output, NewRouter: router}}},
		}}
	}
	for _, c := range []struct {
		name                           string
		sourceSides, procSides, output int
		want                           string
	}{
		{name: "main output", want: ""},
		{name: "side output", procSides: 2, output: 2, want: ""},
		{name: "missing side output", procSides: 1, output: 2, want: `operator "sink" reads output 2 of "proc", which has outputs 0 to 1`},
		{name: "negative output", output: -1, want: `reads output -1 of "proc"`},
		{name: "side output of a source", sourceSides: 1, want: `operator "src": SideOutputs = 1`},
		{name: "negative count", procSides: -1, want: `operator "proc": SideOutputs = -1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := graph(c.sourceSides, c.procSides, c.output)
			err := g.validate(128)
			if c.want == "" {
				if err != nil {
					t.Fatalf("validate = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("validate = %v, want an error containing %q", err, c.want)
			}
		})
	}
}
