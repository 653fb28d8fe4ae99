package runtime

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/parallel"
	"github.com/exactlyonce/exactly/state"
)

// consumer is an edge seen from its producer: operator op reads it as its
// input number input.
type consumer struct{ op, input int }

// build creates the channels and the tasks of one attempt.
func (j *Job) build(ctx context.Context, rp *restorePoint, events chan<- event, async *sync.WaitGroup) ([]*task, error) {
	g := &j.g
	chain := g.chainedTo()
	head := g.chainHeads()
	consumers := make([][]consumer, len(g.Operators))
	for i, op := range g.Operators {
		for k, in := range op.Inputs {
			consumers[in.From] = append(consumers[in.From], consumer{i, k})
		}
	}
	// chans[op][input][producer subtask][consumer subtask]; nil where no
	// channel exists (chained edges, and forward edges off the diagonal).
	chans := make([][][][]chan Message, len(g.Operators))
	for i, op := range g.Operators {
		if chain[i] >= 0 {
			continue
		}
		chans[i] = make([][][]chan Message, len(op.Inputs))
		for k, in := range op.Inputs {
			from := g.Operators[in.From].Parallelism
			chans[i][k] = make([][]chan Message, from)
			for u := range from {
				chans[i][k][u] = make([]chan Message, op.Parallelism)
				for s := range op.Parallelism {
					if in.Partitioning != Forward || u == s {
						chans[i][k][u][s] = make(chan Message, j.opts.ChannelCapacity)
					}
				}
			}
		}
	}
	// debloaters[op][subtask] of the tasks that read channels, with
	// Options.DebloatTarget; nil without.
	var debloaters [][]*debloater
	if j.opts.DebloatTarget > 0 {
		debloaters = make([][]*debloater, len(g.Operators))
		for i, op := range g.Operators {
			if chain[i] >= 0 || len(op.Inputs) == 0 {
				continue
			}
			debloaters[i] = make([]*debloater, op.Parallelism)
			for s := range op.Parallelism {
				debloaters[i][s] = newDebloater(j.opts.DebloatTarget, j.opts.ChannelCapacity, j.opts.BatchSize)
			}
		}
	}
	writer := func(id checkpoint.ID, kind checkpoint.Kind, operator string, subtask int, snap checkpoint.SubtaskSnapshot) (checkpoint.StateHandle, error) {
		return j.store.WriteState(id, kind, operator, subtask, snap)
	}
	var tasks []*task
	for h, op := range g.Operators {
		if head[h] != h {
			continue
		}
		for s := range op.Parallelism {
			t := &task{
				index:   len(tasks),
				subtask: s,
				name:    fmt.Sprintf("%s[%d]", op.Name, s),
				mail:    newMailbox(),
				events:  events,
				async:   async,
				writer:  writer,
				probe:   j.opts.Probe,
				logger:  j.opts.Logger.With("task", fmt.Sprintf("%s[%d]", op.Name, s)),
				times:   j.metrics.taskTimes(fmt.Sprintf("%s[%d]", op.Name, s)),
				obs:     &j.metrics.obs,

				eventTime: j.metrics.taskEventTime(fmt.Sprintf("%s[%d]", op.Name, s)),

				wmInterval:     j.opts.WatermarkInterval,
				reportCaughtUp: j.opts.CheckpointOnCaughtUp > 0,
			}
			if debloaters != nil && debloaters[h] != nil {
				t.debloat = debloaters[h][s]
			}
			for k := range op.Inputs {
				for u := range chans[h][k] {
					if c := chans[h][k][u][s]; c != nil {
						t.inputs = append(t.inputs, c)
					}
				}
			}
			if t.debloat != nil {
				// The task drains all its channels before a barrier has
				// come through each: they share the target.
				t.debloat.batches = j.opts.ChannelCapacity * len(t.inputs)
			}
			// Build the chain back to front, so that each operator's
			// consumers exist when it is created.
			built := map[int]*member{}
			for i := len(g.Operators) - 1; i >= h; i-- {
				if head[i] != h {
					continue
				}
				m, err := j.buildMember(ctx, t, i, s, rp, consumers[i], chain, chans, debloaters, built)
				if err != nil {
					j.closeUnstarted(ctx, append(tasks, t))
					return nil, err
				}
				built[i] = m
				t.members = append([]*member{m}, t.members...)
			}
			if op.NewSource == nil {
				t.headIn = counter(&j.metrics.records, op.Name)
			}
			tasks = append(tasks, t)
		}
	}
	if err := restoreState(ctx, tasks); err != nil {
		j.closeUnstarted(ctx, tasks)
		return nil, err
	}
	return tasks, nil
}

// closeUnstarted releases what the operators of tasks, built but never
// run, hold (readers, writers, connections): nothing to commit.
func (j *Job) closeUnstarted(ctx context.Context, tasks []*task) {
	for _, t := range tasks {
		if err := t.close(ctx, 0, false); err != nil {
			j.opts.Logger.Warn("closing an operator failed", "error", err)
		}
	}
}

// restoresAtOnce is how many subtasks restoreState restores at a time.
// Each downloads its files several at a time itself
// (state.DefaultDownloadConcurrency), so this bounds the connections to
// the checkpoint storage, while letting an object store's latency overlap
// across subtasks.
const restoresAtOnce = 8

// restoreState calls RestoreState of every operator of tasks that is a
// StateRestorer, restoresAtOnce at a time, and returns the error of the
// first that failed in task order, naming its subtask (a panic becomes a
// PanicError). Once one failed, no other starts.
func restoreState(ctx context.Context, tasks []*task) error {
	type restorer struct {
		name string
		r    StateRestorer
	}
	var rs []restorer
	for _, t := range tasks {
		for _, m := range t.members {
			if r, ok := m.op.(StateRestorer); ok {
				rs = append(rs, restorer{fmt.Sprintf("%s[%d]", m.spec.Name, t.subtask), r})
			}
		}
	}
	errs := parallel.Each(len(rs), restoresAtOnce, func(i int) (err error) {
		defer func() {
			if err != nil {
				err = fmt.Errorf("%s: %w", rs[i].name, err)
			}
		}()
		defer recoverAs("restoring the state", &err)
		return rs[i].r.RestoreState(ctx)
	})
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// buildMember creates subtask s of operator i inside task t.
func (j *Job) buildMember(ctx context.Context, t *task, i, s int, rp *restorePoint, cons []consumer,
	chain []int, chans [][][][]chan Message, debloaters [][]*debloater, built map[int]*member) (*member, error) {
	spec := &j.g.Operators[i]
	m := &member{spec: spec}
	if spec.Keyed {
		m.keys = state.RangeForSubtask(s, spec.Parallelism, j.opts.MaxParallelism)
	}
	// outs[k] are the consumers of output k (0 the main one).
	outs := make([][]Emitter, 1+spec.SideOutputs)
	for _, c := range cons {
		in := j.g.Operators[c.op].Inputs[c.input]
		if chain[c.op] == i {
			outs[in.Output] = append(outs[in.Output], chained{op: built[c.op].op, ctx: ctx, name: fmt.Sprintf("%s[%d]", j.g.Operators[c.op].Name, s),
				in: counter(&j.metrics.records, j.g.Operators[c.op].Name)})
			continue
		}
		var targets []chan<- Message
		var limits []*atomic.Int64 // of the targets' tasks, with debloating
		for x, ch := range chans[c.op][c.input][s] {
			if ch != nil {
				targets = append(targets, ch)
				if debloaters != nil {
					limits = append(limits, debloaters[c.op][x].limit)
				}
			}
		}
		rctx := withBackpressure(ctx, &t.times.backpressured)
		if limits != nil {
			rctx = withBatchCaps(rctx, limits)
		}
		r := in.NewRouter(rctx, targets, j.opts.BatchSize, j.opts.MaxParallelism)
		t.routers = append(t.routers, r)
		outs[in.Output] = append(outs[in.Output], r)
	}
	emitted := counter(&j.metrics.out, spec.Name)
	sides := make([]Emitter, spec.SideOutputs)
	for k := range sides {
		sides[k] = counted{emitterOf(outs[1+k]), emitted}
	}
	oc := OperatorContext{
		Job:                j.g.Job,
		Operator:           spec.Name,
		Subtask:            s,
		Parallelism:        spec.Parallelism,
		MaxParallelism:     j.opts.MaxParallelism,
		KeyGroups:          m.keys,
		BatchSize:          j.opts.BatchSize,
		CheckpointInterval: j.opts.CheckpointInterval,
		Commit:             j.opts.commitPolicy(),
		Owner:              j.owner,
		Records:            counter(&j.metrics.records, spec.Name),
		LateRecords:        counter(&j.metrics.late, spec.Name),
		Logger:             j.opts.Logger.With("operator", spec.Name, "subtask", s),
		SideOutputs:        sides,
	}
	oc.SharedFiles = sharedFiles{store: j.store}
	if rp != nil {
		snap, err := rp.snapshotFor(spec, m.keys)
		if err != nil {
			return nil, err
		}
		oc.Restored = snap
		oc.SharedFiles = sharedFiles{store: j.store, dir: rp.dir, own: rp.inStorage()}
	}
	if err := newOperator(ctx, m, oc, counted{emitterOf(outs[0]), emitted}); err != nil {
		return nil, fmt.Errorf("%s[%d]: %w", spec.Name, s, err)
	}
	j.observe(m, s)
	return m, nil
}

// observe registers what the control API reads of subtask s of m: a
// sink's commits, a source's lag.
func (j *Job) observe(m *member, s int) {
	if m.source != nil {
		if l, ok := m.source.(LagReporter); ok {
			j.metrics.obs.setLag(m.spec.Name, s, l)
		}
		return
	}
	if _, ok := m.op.(CheckpointListener); ok {
		j.metrics.obs.addSink(m.spec.Name, m.spec.Parallelism)
	}
}

// newOperator creates the operator of m; a panic in its constructor (a
// user's setup function) becomes an error.
func newOperator(ctx context.Context, m *member, oc OperatorContext, out Emitter) (err error) {
	defer recoverAs("creating the operator", &err)
	if m.spec.NewSource != nil {
		m.source, err = m.spec.NewSource(ctx, oc, out)
	} else {
		m.op, err = m.spec.New(ctx, oc, out)
	}
	return err
}

// chained hands batches to the next operator of a chain by a direct call. A
// panic in it becomes an error naming it.
type chained struct {
	op   Operator
	ctx  context.Context
	name string        // the operator subtask, for errors
	in   *atomic.Int64 // the records the operator received
}

func (c chained) Emit(batch any) (err error) {
	defer recoverAs(c.name, &err)
	c.in.Add(batchLen(batch))
	return c.op.Process(c.ctx, batch)
}

// emitterOf returns the emitter that feeds every one of outs: none
// discards, one is itself, several a fanout.
func emitterOf(outs []Emitter) Emitter {
	if len(outs) == 1 {
		return outs[0]
	}
	return fanout(outs)
}

// counted counts the records of the batches it hands on: one reflection
// call per batch, none per record.
type counted struct {
	e Emitter
	n *atomic.Int64
}

func (c counted) Emit(batch any) error {
	c.n.Add(batchLen(batch))
	return c.e.Emit(batch)
}

// batchLen returns the number of records of a batch (a slice): one
// reflection call per batch, none per record.
func batchLen(batch any) int64 {
	if v := reflect.ValueOf(batch); v.Kind() == reflect.Slice {
		return int64(v.Len())
	}
	return 0
}

// fanout hands each batch to several consumers in turn.
type fanout []Emitter

func (f fanout) Emit(batch any) error {
	for _, e := range f {
		if err := e.Emit(batch); err != nil {
			return err
		}
	}
	return nil
}
