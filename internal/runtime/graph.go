package runtime

import (
	"context"
	"fmt"
	"strings"
)

// Partitioning decides which consumer subtask receives a record.
type Partitioning int

const (
	// Forward sends subtask i's records to subtask i of the consumer; both
	// sides must have the same parallelism.
	Forward Partitioning = iota
	// Rebalance deals whole batches round-robin over the consumer subtasks.
	Rebalance
	// Hash sends each record to the subtask owning its key group.
	Hash
	// Broadcast sends every record to every consumer subtask.
	Broadcast
)

func (p Partitioning) String() string {
	switch p {
	case Forward:
		return "forward"
	case Rebalance:
		return "rebalance"
	case Hash:
		return "hash"
	case Broadcast:
		return "broadcast"
	}
	return fmt.Sprintf("partitioning(%d)", int(p))
}

// Input is an edge into an operator.
type Input struct {
	// From is the index of the producing operator in [Graph.Operators].
	From int
	// Output is the output of From the edge reads: 0 its main output, i in
	// [1, SideOutputs] of From its side output i (see
	// [OperatorContext].SideOutputs).
	Output int
	// Partitioning decides which consumer subtask gets each record.
	Partitioning Partitioning
	// NewRouter builds the producer-side router of this edge for one producer
	// subtask; outs holds the channels to the consumer subtasks it may reach
	// (one for Forward). Use [NewRouter].
	NewRouter func(ctx context.Context, outs []chan<- Message, batchSize, maxParallelism int) Router
	// Shuffle is what the builder of the graph knows of a Hash edge's
	// records, to carry them between processes (package stream's stages);
	// the engine does not use it.
	Shuffle any
}

// OperatorSpec describes one operator of a graph.
type OperatorSpec struct {
	// Name is unique in the job and stable across restarts: state is
	// matched to operators by name.
	Name string
	// Parallelism is the number of subtasks.
	Parallelism int
	// Keyed says that the operator's state is partitioned by key group.
	Keyed bool
	// OwnTask makes the operator head a task of its own even behind a
	// forward edge, which would otherwise chain it into its producer's
	// task: an [AsyncOperator] must, so that its task waits for its
	// completions.
	OwnTask bool
	// BroadcastState says that subtask 0 of the keyed operator checkpoints
	// broadcast state (operator entries that format.IsBroadcastState
	// marks), which every subtask holds alike: a restore gives it to every
	// subtask, not only to those whose key groups overlap subtask 0's as
	// the operator's other entries.
	BroadcastState bool
	// Inputs lists the operator's input edges; empty for sources.
	Inputs []Input
	// SideOutputs is the number of outputs the operator has besides its
	// main one (see [OperatorContext].SideOutputs); 0 for sources.
	SideOutputs int
	// NewSource creates a source subtask; set for sources only.
	NewSource func(ctx context.Context, oc OperatorContext, out Emitter) (SourceOperator, error)
	// New creates a subtask of a non-source operator.
	New func(ctx context.Context, oc OperatorContext, out Emitter) (Operator, error)
	// Restore, when set, is called once per attempt before any task starts.
	// A sink fences earlier owners here and may refuse the start (another
	// incarnation's progress); it returns the step that commits the
	// restored committables and aborts lingering transactions, which the
	// engine runs only once the Restore of every operator succeeded, so
	// that a start one sink refuses changes nothing in the others.
	// Subtasks of an operator with Restore receive no operator entries.
	Restore func(ctx context.Context, rc RestoreContext) (Restoring, error)
	// Check, when set, reports a permanent configuration error of the
	// operator's external system (an unreachable service, a missing topic
	// or table, refused credentials) before the job starts: Start returns
	// it at once instead of spending the restart budget on it.
	Check func(ctx context.Context) error
}

// Restoring is the second step of an operator's restore (see
// [OperatorSpec].Restore): Finish commits and aborts what the restored
// checkpoint decides; Close releases what the first step opened, whether or
// not Finish ran.
type Restoring interface {
	Finish(ctx context.Context) error
	Close() error
}

// Graph is a dataflow job: operators in topological order.
type Graph struct {
	// Job is the job's name, stable across restarts.
	Job string
	// Operators are listed so that every input refers to an earlier operator.
	Operators []OperatorSpec
}

// chainedTo returns, for every operator, the index of the operator it is
// chained to (runs in the same task as), or -1 when it heads its own task.
// taskNames names the tasks in the order build creates them — one per
// subtask of each chain's head operator — as "head[s]", or "head[s] (head →
// next → …)" for a chain of several operators, for the coordinator's
// messages about subtasks that did not acknowledge.
func (g *Graph) taskNames() []string {
	head := g.chainHeads()
	members := make([][]string, len(g.Operators))
	for i, op := range g.Operators {
		members[head[i]] = append(members[head[i]], op.Name)
	}
	var names []string
	for i, op := range g.Operators {
		if head[i] != i {
			continue
		}
		for s := range op.Parallelism {
			name := fmt.Sprintf("%s[%d]", op.Name, s)
			if len(members[i]) > 1 {
				name += " (" + strings.Join(members[i], " → ") + ")"
			}
			names = append(names, name)
		}
	}
	return names
}

// chainHeads returns, for every operator, the index of the first operator
// of its chain: the one whose task runs it.
func (g *Graph) chainHeads() []int {
	chain := g.chainedTo()
	head := make([]int, len(g.Operators))
	for i := range g.Operators {
		head[i] = i
		if chain[i] >= 0 {
			head[i] = head[chain[i]]
		}
	}
	return head
}

func (g *Graph) chainedTo() []int {
	chain := make([]int, len(g.Operators))
	for i, op := range g.Operators {
		chain[i] = -1
		if len(op.Inputs) == 1 && op.Inputs[0].Partitioning == Forward && !op.OwnTask {
			chain[i] = op.Inputs[0].From
		}
	}
	return chain
}
