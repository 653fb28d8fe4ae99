package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/state"
)

// The engine (package internal/runtime) is not importable; these are the
// parts of it a job author reads. Options, RestartStrategy,
// ControlOptions and Running are this package's own types (options.go,
// running.go).
type (
	// Metrics are the counters of a running job, safe to read at any time
	// (see package metrics for Prometheus).
	Metrics = runtime.Metrics
	// CheckpointStats describes a completed checkpoint.
	CheckpointStats = runtime.CheckpointStats
	// PanicError is the error of an attempt that a panic in user code (or
	// an operator) ended; it names the operator subtask.
	PanicError = runtime.PanicError
	// ProbePoint names a point of the checkpoint protocol, for
	// [Options].Probe (crash tests, fault injection).
	ProbePoint = runtime.ProbePoint
)

// The points of the checkpoint protocol that [Options].Probe sees.
const (
	ProbeBarrierInjected = runtime.ProbeBarrierInjected
	ProbeSnapshotTaken   = runtime.ProbeSnapshotTaken
	ProbeMetadataWritten = runtime.ProbeMetadataWritten
	ProbeCommitted       = runtime.ProbeCommitted
)

// Job is a dataflow job under construction. Build it with the functions of
// this package, then call [Job.Run] or [Job.Start]. A Job is not safe for
// concurrent use while it is being built.
type Job struct {
	name         string
	nodes        []*node
	errs         []error
	stateBackend state.BackendConfig
}

// node is one operator as the builder knows it; its parallelism is
// resolved when the job starts.
type node struct {
	spec        runtime.OperatorSpec
	parallelism int  // 0: inherit or the job's default
	inherit     bool // stateless: inherit the first input's parallelism
	sideOutputs bool // a process function, which may have side outputs
	sides       []sideTag
	source      any                                         // a source's source.Source, as given to Source
	sink        any                                         // a sink's sink.Sink, as given to SinkTo
	eventTime   bool                                        // a source with event time
	withSource  func(src any) (runtime.OperatorSpec, error) // a source's spec with another source.Source of its type
}

// New returns an empty job. The name is recorded in checkpoints.
func New(name string) *Job { return &Job{name: name} }

// Name returns the name the job was created with.
func (j *Job) Name() string { return j.name }

// Sources returns the job's sources by name, each the source.Source value
// given to [Source] or [SourceWithEventTime] (package cluster checks that
// a task's job reads only the task's partition).
func (j *Job) Sources() map[string]any {
	m := map[string]any{}
	for _, nd := range j.nodes {
		if nd.source != nil {
			m[nd.spec.Name] = nd.source
		}
	}
	return m
}

// SetStateBackend chooses where the keyed state of the job's keyed
// operators ([Process], [WindowAggregate], [CoProcess], the joins) lives: by default on the heap;
// state.BackendConfig{Kind: state.PebbleBackend, Dir: dir} keeps it on disk
// under dir, which is then required. Checkpoints are the same either way,
// so a job can change backends between runs. See docs/state.md.
func (j *Job) SetStateBackend(c state.BackendConfig) { j.stateBackend = c }

// StateBackend returns the configuration SetStateBackend set (the zero
// value, the heap backend, if it was not called).
func (j *Job) StateBackend() state.BackendConfig { return j.stateBackend }

// Options are typed by the kind of operator they configure, so that an
// option given to an operator it does not apply to does not compile (a
// Name given to a sink would otherwise rename it, and with it the key its
// checkpointed transactions are stored under).
//
//   - [SourceOption]: [Source], [SourceWithEventTime].
//   - [TransformOption]: [Map], [Filter], [FlatMap].
//   - [KeyedOption]: [Process], [CoProcess], [IntervalJoin], [WindowJoin].
//   - [WindowOption]: [WindowAggregate] ([AllowedLateness], [LateRecords]).
//   - [JoinOption]: [InnerJoin] ([StateTTL]).
//   - [SinkOption]: [SinkTo].
//
// [Parallelism] is an option of every kind; [Name] of transforms only
// (sources, keyed operators and sinks are named by their required name
// argument).

// SourceOption configures a source.
type SourceOption interface{ applySource(*node) }

// TransformOption configures a stateless transform.
type TransformOption interface{ applyTransform(*node) }

// KeyedOption configures a keyed operator.
type KeyedOption interface{ applyKeyed(*node) }

// SinkOption configures a sink.
type SinkOption interface{ applySink(*node) }

// AnyOption is an option of every kind of operator.
type AnyOption struct{ set func(*node) }

func (o AnyOption) applySource(nd *node)    { o.set(nd) }
func (o AnyOption) applyTransform(nd *node) { o.set(nd) }
func (o AnyOption) applyKeyed(nd *node)     { o.set(nd) }
func (o AnyOption) applySink(nd *node)      { o.set(nd) }

// Parallelism sets an operator's number of parallel subtasks.
func Parallelism(n int) AnyOption { return AnyOption{func(nd *node) { nd.parallelism = n }} }

// transformOption is an option of transforms only.
type transformOption func(*node)

func (o transformOption) applyTransform(nd *node) { o(nd) }

// Name names a stateless transform (for logs and metrics).
func Name(name string) TransformOption {
	return transformOption(func(nd *node) { nd.spec.Name = name })
}

// options returns the setters of opts, whichever their kind.
func options[O any](opts []O, apply func(O, *node)) func(*node) {
	return func(nd *node) {
		for _, o := range opts {
			apply(o, nd)
		}
	}
}

// add adds nd to the job after configure, when set, applied its options.
func (j *Job) add(nd *node, configure func(*node)) int {
	if configure != nil {
		configure(nd)
	}
	if nd.parallelism < 0 {
		j.errs = append(j.errs, fmt.Errorf("stream: operator %q: Parallelism(%d) must be positive", nd.spec.Name, nd.parallelism))
	}
	j.nodes = append(j.nodes, nd)
	return len(j.nodes) - 1
}

func (j *Job) fail(format string, args ...any) {
	j.errs = append(j.errs, fmt.Errorf("stream: "+format, args...))
}

// graph resolves parallelism and partitioning and returns the runtime graph.
func (j *Job) graph(opts Options) (runtime.Graph, error) {
	if err := j.stateBackend.Validate(); err != nil {
		j.errs = append(j.errs, fmt.Errorf("stream: job %q: Job.SetStateBackend: %w", j.name, err))
	}
	if len(j.errs) > 0 {
		return runtime.Graph{}, errors.Join(j.errs...)
	}
	def := opts.Parallelism
	if def == 0 {
		def = 1
	}
	g := runtime.Graph{Job: j.name}
	for _, nd := range j.nodes {
		spec := nd.spec
		spec.Inputs = append([]runtime.Input(nil), nd.spec.Inputs...)
		switch {
		case nd.parallelism > 0:
			spec.Parallelism = nd.parallelism
		case nd.inherit && len(spec.Inputs) > 0:
			spec.Parallelism = g.Operators[spec.Inputs[0].From].Parallelism
		default:
			spec.Parallelism = def
		}
		for k, in := range spec.Inputs {
			if in.Partitioning == runtime.Forward && g.Operators[in.From].Parallelism != spec.Parallelism {
				spec.Inputs[k].Partitioning = runtime.Rebalance
			}
		}
		g.Operators = append(g.Operators, spec)
	}
	return g, nil
}

// Run runs the job until its sources are finished and every output is
// committed, or until ctx is cancelled (then it returns ctx.Err()).
func (j *Job) Run(ctx context.Context, opts Options) error {
	r, err := j.Start(ctx, opts)
	if err != nil {
		return err
	}
	return r.Wait()
}

// Start starts the job in the background; the returned handle takes
// savepoints, reports metrics and waits for the end.
func (j *Job) Start(ctx context.Context, opts Options) (*Running, error) {
	g, err := j.graph(opts)
	if err != nil {
		return nil, err
	}
	rj, err := runtime.Start(ctx, g, opts.engine())
	if err != nil {
		return nil, err
	}
	return &Running{job: rj}, nil
}
