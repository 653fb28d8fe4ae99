package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/checkpoint/store"
	"github.com/exactlyonce/exactly/internal/coordinator"
)

// driver is one attempt's coordinator loop.
type driver struct {
	job        *Job
	tasks      []*task
	completed  checkpoint.ID    // last completed checkpoint
	persisted  *CheckpointStats // the checkpoint whose metadata was written, until it is announced complete
	sourcesOut int              // source subtasks that reported finished
	tasksDone  int
	result     attemptResult
	finished   bool
}

func (d *driver) loop(ctx, actx context.Context, events <-chan event) attemptResult {
	j := d.job
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for !d.finished {
		// Tick the coordinator exactly when it is due: a checkpoint
		// triggered late makes its output visible late.
		var tick <-chan time.Time
		if at, ok := j.coord.NextTick(); ok {
			timer.Reset(max(time.Until(at), 0))
			tick = timer.C
		}
		var actions []coordinator.Action
		select {
		case <-ctx.Done():
			d.result.err = ctx.Err()
			return d.result
		case now := <-tick:
			actions = j.coord.Tick(now)
		case req := <-j.requests:
			j.nextRequest++
			j.savepoints[j.nextRequest] = req
			actions = j.coord.RequestSavepoint(time.Now(), j.nextRequest, req.stop)
		case e := <-events:
			actions = d.handle(e)
		}
		for len(actions) > 0 {
			a := actions[0]
			actions = append(actions[1:], d.do(actx, a)...)
		}
	}
	return d.result
}

func (d *driver) handle(e event) []coordinator.Action {
	now := time.Now()
	switch e.kind {
	case evAck:
		d.job.metrics.obs.aligned(e.id, e.alignment)
		return d.job.coord.Ack(now, e.id, e.task, e.states)
	case evDecline:
		return d.job.coord.Decline(now, e.id, e.task, e.err.Error())
	case evCaughtUp:
		return d.job.coord.CaughtUp(now)
	case evSourceFinished:
		d.sourcesOut++
		if d.sourcesOut == d.sourceSubtasks() {
			return d.job.coord.SourcesFinished(now)
		}
	case evTaskDone:
		d.tasksDone++
		if d.tasksDone == len(d.tasks) {
			d.finished = true
		}
	case evTaskFailed:
		d.result.err = e.err
		d.finished = true
	}
	return nil
}

func (d *driver) sourceSubtasks() int {
	n := 0
	for _, t := range d.tasks {
		if t.members[0].source != nil {
			n++
		}
	}
	return n
}

// do carries out one coordinator action and returns the actions that follow.
func (d *driver) do(ctx context.Context, a coordinator.Action) []coordinator.Action {
	j := d.job
	switch a := a.(type) {
	case coordinator.ReserveID:
		id, err := j.store.ReserveAbove(j.idFloor)
		if errors.Is(err, store.ErrNotOwner) {
			return j.coord.Fenced(time.Now(), err)
		}
		if err != nil {
			return j.coord.BeginFailed(time.Now(), err)
		}
		return j.coord.Begin(time.Now(), id)
	case coordinator.InjectBarriers:
		j.metrics.obs.triggered(a.ID, a.Kind, time.Now())
		for _, t := range d.tasks {
			if t.members[0].source != nil {
				t.mail.post(func(m *mailbox) {
					m.barriers = append(m.barriers, barrier{id: a.ID, kind: a.Kind, endOfInput: a.EndOfInput})
				})
			}
		}
	case coordinator.PersistMetadata:
		_, err := j.store.Complete(a.Metadata)
		if errors.Is(err, store.ErrNotOwner) {
			return j.coord.Fenced(time.Now(), err)
		}
		if err != nil {
			return j.coord.MetadataPersisted(time.Now(), a.Metadata.ID, err)
		}
		j.opts.Probe(ProbeMetadataWritten, a.Metadata.ID)
		md := a.Metadata
		d.persisted = newCheckpointStats(&md, time.Now())
		d.result.restorePoint = newRestorePoint(j.store, &md, j.store.Dir(md.ID, md.Kind))
		return j.coord.MetadataPersisted(time.Now(), a.Metadata.ID, nil)
	case coordinator.NotifyComplete:
		d.completed = a.ID
		d.result.checkpointed = true
		d.result.final = d.result.final || a.Final
		j.metrics.Completed.Add(1)
		if d.persisted != nil && d.persisted.ID == a.ID {
			j.metrics.obs.completed(d.persisted)
			j.metrics.LastCheckpoint.Store(d.persisted)
			j.metrics.CheckpointDurations.Observe(d.persisted.Completed.Sub(d.persisted.Triggered))
		}
		// Every task learns of the completion before any source is told to
		// finish, so that sinks commit on the notification rather than in Close.
		for _, t := range d.tasks {
			t.mail.post(func(m *mailbox) { m.completed = max(m.completed, a.ID) })
		}
		if a.Final {
			for _, t := range d.tasks {
				if t.members[0].source != nil {
					t.mail.post(func(m *mailbox) { m.finish = true })
				}
			}
		}
		if req, ok := j.savepoints[a.Request]; ok {
			delete(j.savepoints, a.Request)
			req.reply <- savepointResult{path: j.store.Dir(a.ID, a.Kind)}
			j.stopped = j.stopped || req.stop && a.Final
		}
	case coordinator.FailOver:
		d.result.err = a.Err
		if req, ok := j.savepoints[a.Request]; ok {
			delete(j.savepoints, a.Request)
			req.reply <- savepointResult{err: fmt.Errorf("savepoint: %w", a.Err)}
		}
		if a.OutcomeUnknown != 0 {
			d.result.reloadLatest = true
			d.result.outcomeUnknown = true
		}
		d.finished = true
	case coordinator.Abort:
		j.metrics.Aborted.Add(1)
		j.metrics.obs.aborted(a.ID, a.Reason, time.Now())
		// A checkpoint that failed to reserve its id has none: its lines
		// say so rather than "checkpoint=0".
		which := []any{"checkpoint", a.ID, "kind", a.Kind}
		if a.ID == 0 {
			which = []any{"checkpoint", "none (its id was not reserved)", "kind", a.Kind}
		}
		if a.Routine {
			j.opts.Logger.Info("checkpoint in flight abandoned: the job is stopping or restarting (normal; the last completed checkpoint stands)", which...)
		} else {
			j.opts.Logger.Warn("checkpoint aborted", append(which, "reason", a.Reason)...)
		}
		if a.ID != 0 {
			if err := j.store.Discard(a.ID, a.Kind); err != nil {
				j.opts.Logger.Warn("discarding an aborted checkpoint failed", "checkpoint", a.ID, "error", err)
			}
		}
		if req, ok := j.savepoints[a.Request]; ok {
			delete(j.savepoints, a.Request)
			req.reply <- savepointResult{err: fmt.Errorf("savepoint aborted: %s", a.Reason)}
		}
	}
	return nil
}
