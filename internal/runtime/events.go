package runtime

import (
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/coordinator"
)

// eventKind tells what a task reports to the driver.
type eventKind int

const (
	evAck eventKind = iota
	evDecline
	evSourceFinished
	evCaughtUp // a source read new input and then all that is visible (Options.CheckpointOnCaughtUp)
	evTaskDone
	evTaskFailed
)

// event is a task's report to the driver.
type event struct {
	kind   eventKind
	task   int
	id     checkpoint.ID
	states []coordinator.SubtaskState
	err    error
	// alignment is, in an ack, how long the subtask's barrier alignment
	// held inputs blocked.
	alignment time.Duration
}
