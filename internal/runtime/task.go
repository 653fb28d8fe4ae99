package runtime

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/state"
)

// member is one operator subtask inside a task's chain.
type member struct {
	spec   *OperatorSpec
	op     Operator       // nil for a source
	source SourceOperator // nil for other operators
	keys   state.KeyGroupRange
}

// snapshotter returns the member's snapshot hook, nil when it has no state.
func (m *member) snapshotter() Snapshotter {
	if m.source != nil {
		return m.source
	}
	s, _ := m.op.(Snapshotter)
	return s
}

// task runs one subtask of one chain of operators.
type task struct {
	index   int // the subtask's index for the coordinator
	subtask int
	name    string
	members []*member // the head first, then the chained operators in graph order
	routers []Router
	// debloat sizes the batches the task's producers send it
	// (Options.DebloatTarget); nil without.
	debloat *debloater
	inputs  []chan Message // empty for source tasks
	mail    *mailbox
	events  chan<- event
	async   *sync.WaitGroup // snapshot writers
	writer  stateWriter
	probe   func(ProbePoint, checkpoint.ID)
	logger  *slog.Logger
	// wmInterval is the least time between two watermarks of a source task.
	wmInterval time.Duration
	// reportCaughtUp makes a source task tell the driver when it has read
	// all its visible input after reading new input
	// (Options.CheckpointOnCaughtUp); unreported says it read input since
	// it last told.
	reportCaughtUp, unreported bool
	// times accumulates where the task's time goes (busy, idle,
	// backpressured), for the control API; nil counts nothing (tests
	// that build tasks by hand).
	times *taskTimes
	// woke is when the task last stopped waiting for input.
	woke time.Time
	// obs records the commits of the task's sinks; nil records nothing.
	obs *observations
	// eventTime records the watermarks and idleness the task passes on;
	// nil records nothing.
	eventTime *taskEventTime
	// headIn counts the records the head operator receives (the chained
	// operators' are counted where they are handed on); nil for a source
	// or for tasks built by hand.
	headIn *atomic.Int64

	notified checkpoint.ID // highest completed checkpoint the operators were told about
	// inputEnded: the final barrier after the end of the input passed;
	// timers no longer fire.
	inputEnded bool
}

// stateWriter writes one subtask's snapshot of one operator durably.
type stateWriter func(id checkpoint.ID, kind checkpoint.Kind, operator string, subtask int, snap checkpoint.SubtaskSnapshot) (checkpoint.StateHandle, error)

// report sends e to the driver, unless ctx ended.
func (t *task) report(ctx context.Context, e event) {
	e.task = t.index
	select {
	case t.events <- e:
	case <-ctx.Done():
	}
}

// tryReport sends e to the driver if it can take it at once, and says
// whether it did.
func (t *task) tryReport(e event) bool {
	e.task = t.index
	select {
	case t.events <- e:
		return true
	default:
		return false
	}
}

// runRecovered is run with a panic of an operator of the chain turned into
// an error, so that it fails the attempt instead of the process.
func (t *task) runRecovered(ctx context.Context) (err error) {
	defer recoverAs(t.name, &err)
	return t.run(ctx)
}

// run runs the task: a source loop or an operator loop (source_task.go,
// operator_task.go).
func (t *task) run(ctx context.Context) error {
	t.woke = time.Now()
	if t.members[0].source != nil {
		return t.runSource(ctx)
	}
	return t.runOperators(ctx)
}

// drainMailbox handles the driver's requests. It returns done when the task
// has ended its stream.
func (t *task) drainMailbox(ctx context.Context) (done bool, err error) {
	barriers, completed, finish := t.mail.take()
	for _, b := range barriers {
		if err := t.checkpoint(ctx, b, 0); err != nil {
			return false, err
		}
		t.probe(ProbeBarrierInjected, b.id)
	}
	if err := t.notifyComplete(ctx, completed); err != nil {
		return false, err
	}
	if finish {
		return true, t.endStream(ctx)
	}
	return false, nil
}

// notifyComplete tells the operators of the chain that checkpoint id
// completed (sinks commit), once per id.
func (t *task) notifyComplete(ctx context.Context, id checkpoint.ID) error {
	if id <= t.notified {
		return nil
	}
	t.notified = id
	for _, m := range t.members {
		if ks, ok := m.op.(KindSnapshotter); ok {
			ks.SnapshotComplete(id)
		}
		var l CheckpointListener
		if m.source != nil {
			l, _ = m.source.(CheckpointListener)
		} else {
			l, _ = m.op.(CheckpointListener)
		}
		if l == nil {
			continue
		}
		if err := l.CheckpointComplete(ctx, id); err != nil {
			return fmt.Errorf("%s: completing checkpoint %d: %w", m.spec.Name, id, err)
		}
		if m.source == nil {
			t.committed(m.spec.Name, id)
			t.probe(ProbeCommitted, id)
		}
	}
	return nil
}

// endStream tells every consumer that this subtask is done and the driver
// that the task ended.
func (t *task) endStream(ctx context.Context) error {
	for _, r := range t.routers {
		if err := r.Broadcast(endOfStream); err != nil {
			return err
		}
	}
	t.report(ctx, event{kind: evTaskDone})
	return nil
}

// flush sends the records buffered in every router.
func (t *task) flush() error {
	for _, r := range t.routers {
		if err := r.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// close releases every operator of the task.
func (t *task) close(ctx context.Context, completed checkpoint.ID, clean bool) error {
	var first error
	for _, m := range t.members {
		var c Closer
		if m.source != nil {
			c, _ = m.source.(Closer)
		} else {
			c, _ = m.op.(Closer)
		}
		if c == nil {
			continue
		}
		if err := closeRecovered(ctx, c, completed, clean); err != nil && first == nil {
			first = fmt.Errorf("%s[%d]: close: %w", m.spec.Name, t.subtask, err)
		}
	}
	return first
}

// closeRecovered closes c; a panic in it becomes an error.
func closeRecovered(ctx context.Context, c Closer, completed checkpoint.ID, clean bool) (err error) {
	defer recoverAs("close", &err)
	return c.Close(ctx, completed, clean)
}

// committed records that the task's subtask of sink committed id.
func (t *task) committed(sink string, id checkpoint.ID) {
	if t.obs != nil {
		t.obs.committed(id, sink, time.Now())
	}
}

// waiting is called when the task starts to wait for input or mail; it
// counts the time since it last woke as busy, less the time its routers
// waited for room meanwhile.
func (t *task) waiting() time.Time {
	now := time.Now()
	if t.times != nil && !t.woke.IsZero() {
		t.times.busy.Add(int64(now.Sub(t.woke)))
	}
	return now
}

// awake is called when the task stops waiting, since it began to.
func (t *task) awake(since time.Time) {
	t.woke = time.Now()
	if t.times != nil {
		t.times.idle.Add(int64(t.woke.Sub(since)))
	}
}
