package stream_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/stream"
)

// refusing is a sink whose committer refuses every start with
// sink.ErrForeignProgress, as the PostgreSQL, SQLite and file sinks do when
// they hold another incarnation's progress.
type refusing struct{ *memSink[int] }

func (r refusing) NewCommitter(context.Context, sink.CommitterInfo) (sink.Committer, error) {
	return refusingCommitter{memCommitter[int]{r.memSink}}, nil
}

type refusingCommitter struct{ memCommitter[int] }

func (refusingCommitter) Fence(context.Context, checkpoint.ID) error {
	return fmt.Errorf("another incarnation committed here: %w", sink.ErrForeignProgress)
}

// A start that one sink refuses (another incarnation's progress) changes
// nothing in any other sink: every sink is fenced before any commits or
// aborts, so the other sinks' transactions, which the older incarnation
// still needs, survive the refused start.
func TestRefusedStartAbortsNothingInOtherSinks(t *testing.T) {
	first := newMemSink[int]()
	first.prepared["older-incarnation"] = []int{7}
	j := stream.New("refused")
	nums := stream.Source(j, "nums", counting{n: 10, splits: 1})
	stream.SinkTo(nums, "first", first)
	stream.SinkTo(nums, "second", refusing{newMemSink[int]()})

	err := j.Run(context.Background(), stream.Options{CheckpointDir: t.TempDir()})
	if !errors.Is(err, sink.ErrForeignProgress) {
		t.Fatalf("Run = %v, want an error wrapping sink.ErrForeignProgress", err)
	}
	if !strings.Contains(err.Error(), "to take the output over, start it with stream.Options.TakeOverSinks") {
		t.Fatalf("Run = %v; the error does not name the option that takes the output over", err)
	}
	if _, ok := first.prepared["older-incarnation"]; !ok {
		t.Fatalf("the refused start aborted the first sink's transaction of the older incarnation")
	}
}
