package cluster

import (
	"fmt"

	"github.com/exactlyonce/exactly/connectors/kafka"
)

// Task is one unit of a job's work in a cluster: one partition of one of
// the job's input topics. The group assigns tasks to instances; a task's
// state, source position and pending commits belong to it alone (its own
// checkpoints, its own ownership and epoch), so it moves between instances
// whole.
type Task struct {
	// Topic is the input topic.
	Topic string
	// Partition is the partition of Topic.
	Partition int32
}

// String returns "topic/partition".
func (t Task) String() string { return fmt.Sprintf("%s/%d", t.Topic, t.Partition) }

// Name returns "topic.partition", a name for the task that is safe in a job
// name, a path and a Kafka transactional id (a topic name holds only
// letters, digits, '.', '_' and '-'), and unique: the partition is the last
// dot-separated part.
func (t Task) Name() string { return fmt.Sprintf("%s.%d", t.Topic, t.Partition) }

func (t Task) less(u Task) bool {
	if t.Topic != u.Topic {
		return t.Topic < u.Topic
	}
	return t.Partition < u.Partition
}

// SourceOptions returns o restricted to the task's partition: Topics is
// the task's topic alone, Partitions its partition.
func (t Task) SourceOptions(o kafka.SourceOptions) kafka.SourceOptions {
	o.Topics = []string{t.Topic}
	o.TopicRegex = ""
	o.Partitions = []int32{t.Partition}
	return o
}
