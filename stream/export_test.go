package stream

import "github.com/exactlyonce/exactly/internal/stages"

// StagesForTest plans the stages of j (see planStages) and returns, per
// stage, whether it holds sources of the job, the topics it reads and
// those it writes.
func StagesForTest(j *Job, opts Options) (hasSources []bool, reads, writes [][]string, err error) {
	plan, _, err := j.stagePlan(opts)
	if err != nil {
		return nil, nil, nil, err
	}
	for _, st := range plan.stages {
		hasSources = append(hasSources, len(st.sources) > 0)
		var r, w []string
		for _, c := range st.reads {
			r = append(r, plan.cuts[c].topic)
		}
		for _, c := range st.writes {
			w = append(w, plan.cuts[c].topic)
		}
		reads, writes = append(reads, r), append(writes, w)
	}
	return hasSources, reads, writes, nil
}

// StageJobForTest returns the job of stage s of j for one task (see
// Job.stageJob), its sources unchanged.
func StageJobForTest(j *Job, opts Options, name string, s int, read func(sj *Job, topic string) (Stream[[]byte], error), write func(s Stream[stages.Envelope], topic string) error) (*Job, error) {
	plan, maxPar, err := j.stagePlan(opts)
	if err != nil {
		return nil, err
	}
	return j.stageJob(name, plan, s, stageIO{
		read:   func(sj *Job, c cut) (Stream[[]byte], error) { return read(sj, c.topic) },
		write:  func(s Stream[stages.Envelope], c cut) error { return write(s, c.topic) },
		source: func(_ string, src any) (any, error) { return src, nil },
	}, maxPar)
}
