package stream

import (
	"fmt"

	"github.com/exactlyonce/exactly/internal/stages"
)

// stageIO connects a stage's cuts to what carries them between processes
// (Kafka topics, in package cluster; memory, in tests).
type stageIO struct {
	// read adds to j the source of the cut's topic, for the stage's task:
	// a stream of the encoded records.
	read func(j *Job, c cut) (Stream[[]byte], error)
	// write adds to j the sink of the cut's topic, from the envelopes s.
	write func(s Stream[stages.Envelope], c cut) error
	// source returns the task's copy of one of the job's own sources, the
	// source.Source src of the operator name (a Kafka source restricted to
	// the task's partition), or an error when it cannot be split.
	source func(name string, src any) (any, error)
}

// stageJob returns the job of stage s of plan for one task, named name:
// the stage's operators, with the job's sources replaced by io.source, a
// reader of each cut it reads in front of the operator that reads it, and
// a writer of each cut it writes behind the operator that writes it. Its
// operators run one subtask each: the task is the unit of parallelism.
// maxParallelism is the job's number of key groups, which the writers'
// envelopes are computed with.
func (j *Job) stageJob(name string, plan stagePlan, s int, io stageIO, maxParallelism int) (*Job, error) {
	if len(j.errs) > 0 {
		return nil, j.errs[0]
	}
	sj := New(name)
	sj.stateBackend = j.stateBackend
	at := map[int]int{} // the job's operator index → the stage job's
	for _, op := range plan.stages[s].ops {
		nd := *j.nodes[op]
		nd.parallelism = 1
		nd.spec.Inputs = append(nd.spec.Inputs[:0:0], nd.spec.Inputs...)
		if nd.withSource != nil {
			src, err := io.source(nd.spec.Name, nd.source)
			if err != nil {
				return nil, err
			}
			spec, err := nd.withSource(src)
			if err != nil {
				return nil, err
			}
			nd.source, nd.spec.NewSource, nd.spec.Check = src, spec.NewSource, spec.Check
		}
		for k, in := range nd.spec.Inputs {
			c, isCut := plan.cutInto(op, k)
			if !isCut {
				nd.spec.Inputs[k].From = at[in.From]
				continue
			}
			sh, ok := in.Shuffle.(shuffle)
			if !ok {
				return nil, fmt.Errorf("stream: job %q: the key shuffle into %q has no codec (internal error)", j.name, nd.spec.Name)
			}
			if err := sh.check(); err != nil {
				return nil, err
			}
			encoded, err := io.read(sj, c)
			if err != nil {
				return nil, err
			}
			nd.spec.Inputs[k].From = sh.decoder(encoded, c.topic+".decode")
			nd.spec.Inputs[k].Output = 0
		}
		at[op] = sj.add(&nd, nil)
	}
	for _, ci := range plan.stages[s].writes {
		c := plan.cuts[ci]
		in := j.nodes[c.to].spec.Inputs[c.input]
		sh, ok := in.Shuffle.(shuffle)
		if !ok {
			return nil, fmt.Errorf("stream: job %q: the key shuffle into %q has no codec (internal error)", j.name, j.nodes[c.to].spec.Name)
		}
		if err := sh.check(); err != nil {
			return nil, err
		}
		if err := io.write(sh.encoder(sj, at[c.from], in.Output, c.topic+".encode", maxParallelism), c); err != nil {
			return nil, err
		}
	}
	return sj, nil
}

// cutInto returns the cut into input k of operator op, if it is one.
func (p stagePlan) cutInto(op, k int) (cut, bool) {
	for _, c := range p.cuts {
		if c.to == op && c.input == k {
			return c, true
		}
	}
	return cut{}, false
}

// usesEventTime reports whether any of the job's sources tracks event
// time: then its cuts carry watermarks.
func (j *Job) usesEventTime() bool {
	for _, nd := range j.nodes {
		if nd.eventTime {
			return true
		}
	}
	return false
}

func init() {
	stages.Hooks.Plan = func(job, opts any) (stages.Plan, error) {
		j, o := job.(*Job), opts.(Options)
		plan, maxPar, err := j.stagePlan(o)
		if err != nil {
			return stages.Plan{}, err
		}
		out := stages.Plan{EventTime: j.usesEventTime(), MaxParallelism: maxPar}
		for _, st := range plan.stages {
			var s stages.Stage
			for _, op := range st.sources {
				s.Sources = append(s.Sources, j.nodes[op].spec.Name)
			}
			for _, op := range st.ops {
				if nd := j.nodes[op]; nd.sink != nil {
					s.Sinks = append(s.Sinks, stages.Sink{Name: nd.spec.Name, Sink: nd.sink})
				}
			}
			s.Reads, s.Writes = st.reads, st.writes
			out.Stages = append(out.Stages, s)
		}
		for _, c := range plan.cuts {
			out.Cuts = append(out.Cuts, stages.Cut{Topic: c.topic, From: c.fromStage, To: c.toStage})
		}
		return out, nil
	}
	stages.Hooks.StageJob = func(job, opts any, name string, s int, io stages.IO) (any, error) {
		j, o := job.(*Job), opts.(Options)
		plan, maxPar, err := j.stagePlan(o)
		if err != nil {
			return nil, err
		}
		cutOf := func(c cut) stages.Cut { return stages.Cut{Topic: c.topic, From: c.fromStage, To: c.toStage} }
		return j.stageJob(name, plan, s, stageIO{
			read: func(sj *Job, c cut) (Stream[[]byte], error) {
				v, err := io.Read(sj, cutOf(c))
				if err != nil {
					return Stream[[]byte]{}, err
				}
				return v.(Stream[[]byte]), nil
			},
			write:  func(e Stream[stages.Envelope], c cut) error { return io.Write(e, cutOf(c)) },
			source: io.Source,
		}, maxPar)
	}
}

// stagePlan plans the stages of j's graph under opts, and returns the
// number of key groups the envelopes are computed with.
func (j *Job) stagePlan(opts Options) (stagePlan, int, error) {
	g, err := j.graph(opts)
	if err != nil {
		return stagePlan{}, 0, err
	}
	plan, err := planStages(g)
	maxPar := opts.MaxParallelism
	if maxPar == 0 {
		maxPar = 128 // the engine's default
	}
	return plan, maxPar, err
}
