package stream

import (
	"context"

	"github.com/exactlyonce/exactly/internal/commit"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/sink"
)

// ErrCommitPending is wrapped by the error of a job that stopped while the
// output of its last completed checkpoint could not be committed (a sink
// outage, a constraint the rows violate at commit time). The output is not
// lost: it is prepared and recorded in that checkpoint, and the next start
// of the job commits it, once the cause is fixed.
var ErrCommitPending = commit.ErrPending

// SinkTo writes s to an exactly-once sink. name must be unique and stable:
// the sink's pending transactions are checkpointed under it. How and when
// the output becomes visible is the business of package internal/commit.
func SinkTo[T any](s Stream[T], name string, sk sink.Sink[T], opts ...SinkOption) {
	j := s.job
	if sk == nil {
		j.fail("sink %q is nil", name)
	}
	nd := &node{inherit: true, sink: sk}
	nd.spec = runtime.OperatorSpec{
		Name:   name,
		Inputs: []runtime.Input{s.input()},
		New: func(ctx context.Context, oc runtime.OperatorContext, _ runtime.Emitter) (runtime.Operator, error) {
			return commit.NewOperator(ctx, oc, sk)
		},
		Restore: func(ctx context.Context, rc runtime.RestoreContext) (runtime.Restoring, error) {
			return commit.Restore(ctx, sk, rc)
		},
		Check: checkOf(sk),
	}
	j.add(nd, options(opts, SinkOption.applySink))
}
