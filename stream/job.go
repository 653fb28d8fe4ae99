package stream

import (
	"context"
	"errors"
	"fmt"

	"github.com/exactlyonce/exactly/runtime"
)

// Options configures a run of a job; see [runtime.Options] for every field
// and its default.
type Options = runtime.Options

// RestartStrategy decides how a failed job is restarted; see [runtime.RestartStrategy].
type RestartStrategy = runtime.RestartStrategy

// Job is a dataflow job under construction. Build it with the functions of
// this package, then call [Job.Run] or [Job.Start]. A Job is not safe for
// concurrent use while it is being built.
type Job struct {
	name  string
	nodes []*node
	errs  []error
}

// node is one operator as the builder knows it; its parallelism is
// resolved when the job starts.
type node struct {
	spec        runtime.OperatorSpec
	parallelism int  // 0: inherit or the job's default
	inherit     bool // stateless: inherit the first input's parallelism
}

// New returns an empty job. The name is recorded in checkpoints.
func New(name string) *Job { return &Job{name: name} }

// Option configures one operator.
type Option func(*node)

// Parallelism sets an operator's number of parallel subtasks.
func Parallelism(n int) Option { return func(nd *node) { nd.parallelism = n } }

// Name names a stateless operator (for logs and metrics); sources, keyed
// process functions and sinks are named by their required name argument.
func Name(name string) Option { return func(nd *node) { nd.spec.Name = name } }

func (j *Job) add(nd *node, opts []Option) int {
	for _, o := range opts {
		o(nd)
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

// Graph resolves parallelism and partitioning and returns the runtime graph.
func (j *Job) Graph(opts Options) (runtime.Graph, error) {
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
func (j *Job) Start(ctx context.Context, opts Options) (*runtime.Job, error) {
	g, err := j.Graph(opts)
	if err != nil {
		return nil, err
	}
	return runtime.Start(ctx, g, opts)
}
