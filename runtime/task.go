package runtime

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/state"
)

// Source subtasks with nothing to read wait this long at first, doubling up
// to idleMax, before they poll again. A mailbox message wakes them at once.
const (
	idleMin = time.Millisecond
	idleMax = 50 * time.Millisecond
)

// member is one operator subtask inside a task's chain.
type member struct {
	spec   *OperatorSpec
	op     Operator       // nil for a source
	source SourceOperator // nil for other operators
	keys   state.KeyGroupRange
}

func (m *member) snapshotter() Snapshotter {
	if m.source != nil {
		return m.source
	}
	s, _ := m.op.(Snapshotter)
	return s
}

// trigger asks a source subtask to emit a barrier; it also describes the
// barrier an operator task aligns.
type trigger struct {
	id   uint64
	kind checkpoint.Kind
	// endOfInput: the final checkpoint after every source finished.
	// Nothing may be emitted after it, so timers stop firing.
	endOfInput bool
}

// mailbox carries the driver's requests to a task without ever blocking the
// driver: the task drains it between batches.
type mailbox struct {
	mu        sync.Mutex
	triggers  []trigger
	completed uint64
	finish    bool
	wake      chan struct{}
	// interrupt cancels the source poll in progress, if any, so that a
	// barrier or a commit notice does not wait for a blocking read.
	interrupt context.CancelFunc
}

func newMailbox() *mailbox { return &mailbox{wake: make(chan struct{}, 1)} }

func (m *mailbox) post(f func(*mailbox)) {
	m.mu.Lock()
	f(m)
	if m.interrupt != nil {
		m.interrupt()
	}
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// interruptible returns a context for one source poll that the next post
// cancels (at once if mail is already waiting), and the function that
// ends it.
func (m *mailbox) interruptible(ctx context.Context) (context.Context, func()) {
	pctx, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	m.interrupt = cancel
	m.mu.Unlock()
	if len(m.wake) > 0 {
		cancel()
	}
	return pctx, func() {
		m.mu.Lock()
		m.interrupt = nil
		m.mu.Unlock()
		cancel()
	}
}

func (m *mailbox) take() (triggers []trigger, completed uint64, finish bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	triggers, m.triggers = m.triggers, nil
	return triggers, m.completed, m.finish
}

type eventKind int

const (
	evAck eventKind = iota
	evDecline
	evSourceFinished
	evTaskDone
	evTaskFailed
)

// event is a task's report to the driver.
type event struct {
	kind   eventKind
	task   int
	id     uint64
	states []checkpoint.SubtaskState
	err    error
}

// task runs one subtask of one chain of operators.
type task struct {
	index   int // the subtask's index for the coordinator
	subtask int
	name    string
	members []*member // the head first, then the chained operators in graph order
	routers []Router
	inputs  []chan Message // empty for source tasks
	mail    *mailbox
	events  chan<- event
	async   *sync.WaitGroup // snapshot writers
	writer  stateWriter
	probe   func(ProbePoint, uint64)
	logger  *slog.Logger
	// wmInterval is the least time between two watermarks of a source task.
	wmInterval time.Duration

	notified uint64 // highest completed checkpoint the operators were told about
	// inputEnded: the final barrier after the end of the input passed;
	// timers no longer fire.
	inputEnded bool
}

// stateWriter writes one subtask's snapshot of one operator durably.
type stateWriter func(id uint64, kind checkpoint.Kind, operator string, subtask int, snap checkpoint.SubtaskSnapshot) (checkpoint.StateHandle, error)

func (t *task) report(ctx context.Context, e event) {
	e.task = t.index
	select {
	case t.events <- e:
	case <-ctx.Done():
	}
}

// runRecovered is run with a panic of an operator of the chain turned into
// an error, so that it fails the attempt instead of the process.
func (t *task) runRecovered(ctx context.Context) (err error) {
	defer recoverAs(t.name, &err)
	return t.run(ctx)
}

func (t *task) run(ctx context.Context) error {
	if t.members[0].source != nil {
		return t.runSource(ctx)
	}
	return t.runOperators(ctx)
}

// runSource polls the source, emits batches and serves the mailbox between them.
func (t *task) runSource(ctx context.Context) error {
	src := t.members[0].source
	wms, _ := src.(WatermarkSource)
	merger := newWatermarkMerger(1)
	pacer := newWatermarkPacer(t.wmInterval)
	idle := idleMin
	finished := false
	woken := false
	wait := time.NewTimer(time.Hour)
	defer wait.Stop()
	for {
		// A source that always has records never reaches the select below,
		// and a chain without routers never blocks on a channel that would
		// notice the cancellation.
		if err := ctx.Err(); err != nil {
			return err
		}
		if !woken {
			select {
			case <-t.mail.wake:
				woken = true
			default:
			}
		}
		if woken {
			woken = false
			if done, err := t.drainMailbox(ctx); done || err != nil {
				return err
			}
		}
		if !finished {
			n, fin, err := t.poll(ctx, src)
			if err != nil {
				return fmt.Errorf("source %s: %w", t.name, err)
			}
			if n > 0 {
				if err := t.flush(); err != nil {
					return err
				}
				if err := t.sourceWatermark(ctx, wms, merger, pacer); err != nil {
					return err
				}
				idle = idleMin
				continue
			}
			if fin {
				finished = true
				// Event time ends with the input: every window closes.
				if err := t.forward(ctx, merger.watermark(0, MaxWatermark)); err != nil {
					return err
				}
				t.report(ctx, event{kind: evSourceFinished})
			} else if err := t.sourceWatermark(ctx, wms, merger, pacer); err != nil {
				return err
			}
		}
		var timeout <-chan time.Time
		if !finished {
			wait.Reset(idle)
			timeout = wait.C
			idle = min(2*idle, idleMax)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.mail.wake:
			woken = true
		case <-timeout:
		}
	}
}

// poll polls the source under a context that mail for the task cancels; a
// context.Canceled error from that cancellation is not a failure: the
// source was interrupted to serve the mail.
func (t *task) poll(ctx context.Context, src SourceOperator) (n int, finished bool, err error) {
	pctx, done := t.mail.interruptible(ctx)
	defer done()
	n, finished, err = src.Poll(pctx)
	if errors.Is(err, context.Canceled) && pctx.Err() != nil && ctx.Err() == nil {
		return n, false, nil
	}
	return n, finished, err
}

// sourceWatermark sends the watermark or idleness of a source subtask
// downstream when it changed and the pacer says it is due.
func (t *task) sourceWatermark(ctx context.Context, src WatermarkSource, m *watermarkMerger, p *watermarkPacer) error {
	if src == nil {
		return nil
	}
	wm, idle := src.Watermark()
	if !p.due(time.Now(), wm) {
		return nil
	}
	if idle {
		return t.forward(ctx, m.markIdle(0, wm))
	}
	return t.forward(ctx, m.watermark(0, wm))
}

// drainMailbox handles the driver's requests. It returns done when the task
// has ended its stream.
func (t *task) drainMailbox(ctx context.Context) (done bool, err error) {
	triggers, completed, finish := t.mail.take()
	for _, tr := range triggers {
		if err := t.checkpoint(ctx, tr); err != nil {
			return false, err
		}
		t.probe(ProbeBarrierInjected, tr.id)
	}
	if err := t.notifyComplete(ctx, completed); err != nil {
		return false, err
	}
	if finish {
		return true, t.endStream(ctx)
	}
	return false, nil
}

func (t *task) notifyComplete(ctx context.Context, id uint64) error {
	if id <= t.notified {
		return nil
	}
	t.notified = id
	for _, m := range t.members {
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

func (t *task) flush() error {
	for _, r := range t.routers {
		if err := r.Flush(); err != nil {
			return err
		}
	}
	return nil
}

// checkpoint snapshots every operator of the chain, forwards the barrier and
// writes the state on another goroutine, which acknowledges when it is durable.
func (t *task) checkpoint(ctx context.Context, tr trigger) error {
	id, kind := tr.id, tr.kind
	if tr.endOfInput {
		// Output after the final barrier would go into a transaction that
		// no checkpoint covers: processing-time timers still pending at
		// the end of the input never fire.
		t.inputEnded = true
	}
	type pending struct {
		m      *member
		encode func() (checkpoint.SubtaskSnapshot, error)
	}
	var snaps []pending
	for _, m := range t.members {
		s := m.snapshotter()
		if s == nil {
			continue
		}
		encode, err := s.Snapshot(ctx, id)
		if err != nil {
			return fmt.Errorf("%s[%d]: snapshot for checkpoint %d: %w", m.spec.Name, t.subtask, id, err)
		}
		snaps = append(snaps, pending{m, encode})
	}
	t.probe(ProbeSnapshotTaken, id)
	for _, r := range t.routers {
		if err := r.Broadcast(barrierMessage(tr)); err != nil {
			return err
		}
	}
	t.async.Go(func() {
		var states []checkpoint.SubtaskState
		for _, p := range snaps {
			snap, err := encodeRecovered(fmt.Sprintf("%s[%d]: encoding the snapshot", p.m.spec.Name, t.subtask), p.encode)
			var pe *PanicError
			if errors.As(err, &pe) {
				// A bug, not a transient failure: fail the attempt rather
				// than declining every checkpoint from now on.
				t.report(ctx, event{kind: evTaskFailed, err: err})
				return
			}
			if err == nil && snap.IsEmpty() {
				continue
			}
			var h checkpoint.StateHandle
			if err == nil {
				h, err = t.writer(id, kind, p.m.spec.Name, t.subtask, snap)
			}
			if err != nil {
				t.logger.Warn("checkpoint declined", "checkpoint", id, "operator", p.m.spec.Name, "error", err)
				t.report(ctx, event{kind: evDecline, id: id, err: err})
				return
			}
			h.Subtask = t.subtask
			if p.m.spec.Keyed {
				h.KeyGroupStart, h.KeyGroupEnd = p.m.keys.Start, p.m.keys.End
			}
			states = append(states, checkpoint.SubtaskState{Operator: p.m.spec.Name, Parallelism: p.m.spec.Parallelism, Handle: h})
		}
		t.report(ctx, event{kind: evAck, id: id, states: states})
	})
	return nil
}

// encodeRecovered calls encode; a panic in it (a user's codec) becomes an error.
func encodeRecovered(where string, encode func() (checkpoint.SubtaskSnapshot, error)) (snap checkpoint.SubtaskSnapshot, err error) {
	defer recoverAs(where, &err)
	return encode()
}

// input state of a task with input channels.
type inputs struct {
	chans    []chan Message
	blocked  []bool  // barrier of the checkpoint being aligned already arrived
	finished []bool  // end of stream arrived
	live     int     // inputs not finished
	aligning trigger // barrier being aligned; id 0 when none
	arrived  int     // barriers of it arrived
	cases    []reflect.SelectCase
}

const (
	caseDone = iota
	caseMail
	caseTimer
	caseInputs
)

// runOperators reads the input channels, aligns barriers and fires timers.
func (t *task) runOperators(ctx context.Context) error {
	in := &inputs{
		chans:    t.inputs,
		blocked:  make([]bool, len(t.inputs)),
		finished: make([]bool, len(t.inputs)),
		live:     len(t.inputs),
	}
	merger := newWatermarkMerger(len(t.inputs))
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	head := t.members[0].op
	var timerOps []TimerOperator
	for _, m := range t.members {
		if to, ok := m.op.(TimerOperator); ok {
			timerOps = append(timerOps, to)
		}
	}
	for {
		var timerC <-chan time.Time
		if next, ok := nextTimer(timerOps); ok && !t.inputEnded {
			timer.Reset(time.Until(next))
			timerC = timer.C
		}
		which, i, msg := in.receive(ctx, t.mail.wake, timerC)
		switch which {
		case caseDone:
			return ctx.Err()
		case caseMail:
			if _, err := t.drainMailbox(ctx); err != nil {
				return err
			}
			continue
		case caseTimer:
			now := time.Now()
			for _, to := range timerOps {
				if err := to.FireTimers(ctx, now); err != nil {
					return fmt.Errorf("%s: timers: %w", t.name, err)
				}
			}
			if err := t.flush(); err != nil {
				return err
			}
			continue
		}
		switch {
		case msg.batch != nil:
			if err := head.Process(ctx, msg.batch); err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if err := t.flush(); err != nil {
				return err
			}
		case msg.hasWatermark:
			if err := t.forward(ctx, merger.watermark(i, msg.watermark)); err != nil {
				return err
			}
		case msg.idle:
			if err := t.forward(ctx, merger.markIdle(i, MinWatermark)); err != nil {
				return err
			}
		case msg.eos:
			in.finished[i] = true
			in.live--
			if err := t.forward(ctx, merger.finish(i)); err != nil {
				return err
			}
			if in.live == 0 {
				// Commit notifications posted before the end of the stream
				// must be served before the task ends.
				if _, err := t.drainMailbox(ctx); err != nil {
					return err
				}
				return t.endStream(ctx)
			}
			if err := t.maybeAligned(ctx, in); err != nil {
				return err
			}
		default:
			if err := t.barrier(ctx, in, i, msg); err != nil {
				return err
			}
		}
	}
}

// barrier handles the barrier of checkpoint id arriving on input i.
func (t *task) barrier(ctx context.Context, in *inputs, i int, msg Message) error {
	switch id := msg.barrier; {
	case id < in.aligning.id:
		return nil // a barrier of an abandoned checkpoint
	case id > in.aligning.id:
		// A newer checkpoint: any alignment in progress is abandoned.
		clear(in.blocked)
		in.arrived = 0
		in.aligning = trigger{id: id, kind: checkpoint.KindCheckpoint, endOfInput: msg.endOfInput}
		if msg.savepoint {
			in.aligning.kind = checkpoint.KindSavepoint
		}
	}
	if !in.blocked[i] {
		in.blocked[i] = true
		in.arrived++
	}
	return t.maybeAligned(ctx, in)
}

// maybeAligned takes the checkpoint being aligned once its barrier arrived
// on every live input.
func (t *task) maybeAligned(ctx context.Context, in *inputs) error {
	if in.aligning.id == 0 || in.arrived < in.live {
		return nil
	}
	tr := in.aligning
	clear(in.blocked)
	in.aligning, in.arrived = trigger{}, 0
	return t.checkpoint(ctx, tr)
}

// receive waits for the next event of a task with inputs: cancellation, mail,
// a timer, or a message on an input that is neither blocked nor finished.
func (in *inputs) receive(ctx context.Context, mail <-chan struct{}, timer <-chan time.Time) (which, input int, m Message) {
	if len(in.chans) == 1 && !in.blocked[0] && !in.finished[0] {
		select {
		case <-ctx.Done():
			return caseDone, 0, m
		case <-mail:
			return caseMail, 0, m
		case <-timer:
			return caseTimer, 0, m
		case m = <-in.chans[0]:
			return caseInputs, 0, m
		}
	}
	if in.cases == nil {
		in.cases = make([]reflect.SelectCase, caseInputs+len(in.chans))
		for i := range in.cases {
			in.cases[i].Dir = reflect.SelectRecv
		}
		in.cases[caseDone].Chan = reflect.ValueOf(ctx.Done())
		in.cases[caseMail].Chan = reflect.ValueOf(mail)
	}
	in.cases[caseTimer].Chan = reflect.Value{}
	if timer != nil {
		in.cases[caseTimer].Chan = reflect.ValueOf(timer)
	}
	for i, c := range in.chans {
		in.cases[caseInputs+i].Chan = reflect.Value{}
		if !in.blocked[i] && !in.finished[i] {
			in.cases[caseInputs+i].Chan = reflect.ValueOf(c)
		}
	}
	chosen, v, _ := reflect.Select(in.cases)
	if chosen < caseInputs {
		return chosen, 0, m
	}
	return caseInputs, chosen - caseInputs, v.Interface().(Message)
}

func nextTimer(ops []TimerOperator) (time.Time, bool) {
	var next time.Time
	found := false
	for _, op := range ops {
		if t, ok := op.NextTimer(); ok && (!found || t.Before(next)) {
			next, found = t, true
		}
	}
	return next, found
}

// close releases every operator of the task.
func (t *task) close(ctx context.Context, completed uint64, clean bool) error {
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
func closeRecovered(ctx context.Context, c Closer, completed uint64, clean bool) (err error) {
	defer recoverAs("close", &err)
	return c.Close(ctx, completed, clean)
}
