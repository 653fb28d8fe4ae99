package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/state"
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
)

func (p Partitioning) String() string {
	switch p {
	case Forward:
		return "forward"
	case Rebalance:
		return "rebalance"
	case Hash:
		return "hash"
	}
	return fmt.Sprintf("partitioning(%d)", int(p))
}

// Emitter receives an operator's output batches. The batch is a []T of the
// operator's output type; the receiver must not keep it after Emit returns.
type Emitter interface {
	Emit(batch any) error
}

// Operator is one subtask of a non-source operator.
//
// Operators may also implement [Snapshotter], [CheckpointListener],
// [TimerOperator] and [Closer]; the runtime finds them by type assertion.
type Operator interface {
	// Process handles one batch, a []T of the operator's input type. The
	// batch is only valid during the call.
	Process(ctx context.Context, batch any) error
}

// Snapshotter is an operator with state.
type Snapshotter interface {
	// Snapshot captures the operator's state for checkpoint id. It runs
	// synchronously between two batches and must be cheap; the returned
	// function encodes the captured state and runs on another goroutine
	// while processing continues.
	Snapshot(ctx context.Context, id uint64) (func() (checkpoint.SubtaskSnapshot, error), error)
}

// CheckpointListener is an operator told when checkpoints complete.
type CheckpointListener interface {
	// CheckpointComplete reports that checkpoint id and every lower one are
	// complete. Sinks commit here.
	CheckpointComplete(ctx context.Context, id uint64) error
}

// TimerOperator is an operator with processing-time timers.
type TimerOperator interface {
	// NextTimer returns the earliest pending timer.
	NextTimer() (time.Time, bool)
	// FireTimers fires every timer due at now.
	FireTimers(ctx context.Context, now time.Time) error
}

// Closer is an operator that holds resources.
type Closer interface {
	// Close releases the operator's resources. When clean is true the job
	// is stopping deliberately and completed is the last completed
	// checkpoint: sinks commit what it covers and abort the rest. When clean
	// is false the attempt failed; recovery will sort out transactions.
	Close(ctx context.Context, completed uint64, clean bool) error
}

// SourceOperator is one subtask of a source.
type SourceOperator interface {
	// Poll emits at most one batch. It returns how many records it emitted
	// and whether every split of this subtask is finished. ctx is also
	// cancelled when the task has mail (a barrier to inject, a commit
	// notice): a blocking read should then return what it has; an error
	// wrapping context.Canceled caused by that cancellation is ignored. Work that must not be
	// interrupted (opening a split) should use a longer-lived context.
	Poll(ctx context.Context) (n int, finished bool, err error)
	Snapshotter
}

// OperatorContext tells an operator subtask where it runs.
type OperatorContext struct {
	// Job is the job's name.
	Job string
	// Operator is the operator's name.
	Operator string
	// Subtask is the subtask index in [0, Parallelism).
	Subtask int
	// Parallelism is the operator's parallelism.
	Parallelism int
	// MaxParallelism is the job's number of key groups.
	MaxParallelism int
	// KeyGroups is the range of key groups this subtask owns (keyed operators).
	KeyGroups state.KeyGroupRange
	// Restored is the state restored for this subtask, nil on a fresh start.
	// Keyed state holds only the owned key groups; operator entries hold the
	// entries of every former subtask.
	Restored *checkpoint.SubtaskSnapshot
	// BatchSize is the preferred number of records per batch.
	BatchSize int
	// CheckpointInterval is the job's checkpoint interval.
	CheckpointInterval time.Duration
	// Records counts the records this subtask handled; operators add to it.
	Records *atomic.Int64
	// LateRecords counts the records an event-time operator dropped for
	// arriving behind the watermark; operators add to it.
	LateRecords *atomic.Int64
	// CommitRetries is how many times a failed commit is retried.
	CommitRetries int
	// Owner is this run's incarnation and epoch, for sinks' fencing.
	Owner sink.Owner
	// Logger is annotated with the operator and subtask.
	Logger *slog.Logger
}

// RestoreContext is what an operator's Restore hook receives.
type RestoreContext struct {
	// Job is the job's name.
	Job string
	// Operator is the operator's name.
	Operator string
	// CheckpointID is the restored checkpoint's id, 0 on a fresh start.
	CheckpointID uint64
	// Entries holds the operator entries of every former subtask.
	Entries [][]byte
	// CommitRetries is how many times a failed commit is retried.
	CommitRetries int
	// Owner is this run's incarnation and epoch, for sinks' fencing.
	Owner sink.Owner
	// TakeOverSinks is [Options].TakeOverSinks.
	TakeOverSinks bool
	// Logger is annotated with the operator.
	Logger *slog.Logger
}

// Input is an edge into an operator.
type Input struct {
	// From is the index of the producing operator in [Graph.Operators].
	From int
	// Partitioning decides which consumer subtask gets each record.
	Partitioning Partitioning
	// NewRouter builds the producer-side router of this edge for one producer
	// subtask; outs holds the channels to the consumer subtasks it may reach
	// (one for Forward). Use [NewRouter].
	NewRouter func(ctx context.Context, outs []chan<- Message, batchSize, maxParallelism int) Router
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
	// Inputs lists the operator's input edges; empty for sources.
	Inputs []Input
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
		if len(op.Inputs) == 1 && op.Inputs[0].Partitioning == Forward {
			chain[i] = op.Inputs[0].From
		}
	}
	return chain
}
