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
