// Package stages holds the types that package stream and package cluster
// share to run one job as stages joined by repartition topics (issue 29):
// what crosses a cut, and how a stage's cuts are read and written.
package stages

// Envelope is a record on its way through a repartition topic: its key
// group (of the job's MaxParallelism key groups), which picks the topic's
// partition, and the record's encoding.
type Envelope struct {
	KeyGroup int
	Value    []byte
}

// Partition returns the partition of a topic of partitions partitions
// that holds key group kg of maxParallelism: the key groups are dealt in
// contiguous ranges, as Flink deals them to subtasks, so that a partition
// holds whole key groups and the count of partitions may be any number up
// to maxParallelism.
func Partition(kg, maxParallelism, partitions int) int {
	return kg * partitions / maxParallelism
}

// Plan is a job cut into stages at its key shuffles.
type Plan struct {
	// Stages in topological order: a stage reads only cuts that stages
	// before it write.
	Stages []Stage
	// Cuts are the repartition topics between the stages.
	Cuts []Cut
	// EventTime says that the job tracks event time: its cuts carry the
	// writers' watermarks, and their readers wait for every writer's.
	EventTime bool
	// MaxParallelism is the job's number of key groups, which the
	// envelopes' key groups are of.
	MaxParallelism int
}

// Stage is one stage of a plan.
type Stage struct {
	// Sources names the job's own sources in the stage.
	Sources []string
	// Sinks are the job's sinks in the stage.
	Sinks []Sink
	// Reads and Writes index the plan's cuts the stage reads and writes.
	Reads, Writes []int
}

// Sink is one of a job's sinks: its name and its sink.Sink.
type Sink struct {
	Name string
	Sink any
}

// Cut is a key shuffle carried by a repartition topic.
type Cut struct {
	// Topic is the repartition topic's name, derived from the job's and
	// the reading operator's names.
	Topic string
	// From and To are the indices of the writing and the reading stage.
	From, To int
}

// IO connects a stage's job to what carries its cuts. Its values are
// package stream's, which this package cannot name: job is a *stream.Job,
// Read returns a stream.Stream[[]byte] (the encoded records of the cut's
// topic, for the task) and Write takes a stream.Stream[Envelope].
type IO struct {
	Read   func(job any, c Cut) (any, error)
	Write  func(envelopes any, c Cut) error
	Source func(name string, src any) (any, error)
}

// Hooks are package stream's functions on a *stream.Job (job), set by it
// when it is linked in.
var Hooks struct {
	// Plan cuts the job into stages, its graph resolved with opts (a
	// stream.Options).
	Plan func(job, opts any) (Plan, error)
	// StageJob returns the *stream.Job of stage s for one task, named
	// name, its cuts through io.
	StageJob func(job, opts any, name string, s int, io IO) (any, error)
}
