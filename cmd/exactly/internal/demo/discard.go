package demo

import (
	"context"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
)

// discard is a sink that drops every record and has nothing to commit; it
// isolates the engine's own cost in benchmarks.
type discard struct{}

func (discard) NewWriter(context.Context, sink.WriterInfo) (sink.Writer[Total], error) {
	return discard{}, nil
}
func (discard) NewCommitter(context.Context, sink.CommitterInfo) (sink.Committer, error) {
	return discard{}, nil
}
func (discard) Write(context.Context, []Total) error                   { return nil }
func (discard) Prepare(context.Context, checkpoint.ID) ([]byte, error) { return nil, nil }
func (discard) Commit(context.Context, sink.Committable) error         { return nil }
func (discard) Abort(context.Context, sink.Committable) error          { return nil }
func (discard) Fence(context.Context, checkpoint.ID) error             { return nil }
func (discard) AbortLingering(context.Context, checkpoint.ID) error    { return nil }
func (discard) Close() error                                           { return nil }
