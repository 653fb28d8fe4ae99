package runtime

import (
	"fmt"

	"github.com/exactlyonce/exactly/state"
)

// validate checks the graph's structure; user-facing errors name the operator.
func (g *Graph) validate(maxParallelism int) error {
	if g.Job == "" {
		return fmt.Errorf("runtime: the job has no name: give the job a stable name; checkpoints are matched to it")
	}
	if len(g.Operators) == 0 {
		return fmt.Errorf("runtime: job %q has no operators: add a source and a sink", g.Job)
	}
	seen := map[string]bool{}
	for i, op := range g.Operators {
		if op.Name == "" {
			return fmt.Errorf("runtime: operator %d has no name", i)
		}
		if seen[op.Name] {
			return fmt.Errorf("runtime: operator name %q is used twice: names must be unique, because state is matched to operators by name", op.Name)
		}
		seen[op.Name] = true
		if err := state.ValidateParallelism(op.Parallelism, maxParallelism); err != nil {
			return fmt.Errorf("runtime: operator %q: %w", op.Name, err)
		}
		isSource := op.NewSource != nil
		if op.SideOutputs < 0 || (isSource && op.SideOutputs > 0) {
			return fmt.Errorf("runtime: operator %q: SideOutputs = %d: only non-source operators have side outputs, and never a negative number", op.Name, op.SideOutputs)
		}
		if isSource == (op.New != nil) {
			return fmt.Errorf("runtime: operator %q must set exactly one of NewSource and New", op.Name)
		}
		if isSource != (len(op.Inputs) == 0) {
			return fmt.Errorf("runtime: operator %q: sources have no inputs and other operators at least one", op.Name)
		}
		for _, in := range op.Inputs {
			if in.From < 0 || in.From >= i {
				return fmt.Errorf("runtime: operator %q reads from operator %d, which is not listed before it", op.Name, in.From)
			}
			if from := g.Operators[in.From]; in.Output < 0 || in.Output > from.SideOutputs {
				return fmt.Errorf("runtime: operator %q reads output %d of %q, which has outputs 0 to %d (0 is the main output)", op.Name, in.Output, from.Name, from.SideOutputs)
			}
			if in.NewRouter == nil {
				return fmt.Errorf("runtime: operator %q: input from %q has no router", op.Name, g.Operators[in.From].Name)
			}
			if in.Partitioning == Forward && g.Operators[in.From].Parallelism != op.Parallelism {
				return fmt.Errorf("runtime: operator %q (parallelism %d) reads forward from %q (parallelism %d): forward edges need equal parallelism; rebalance or key the stream, or make the parallelisms equal",
					op.Name, op.Parallelism, g.Operators[in.From].Name, g.Operators[in.From].Parallelism)
			}
		}
	}
	return nil
}
