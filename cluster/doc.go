// Package cluster runs one job as many instances — processes on one or
// many machines — that share its work through a Kafka consumer group.
//
// Every instance runs the same binary with the same job and options and
// calls [Run]. The instances join one consumer group over the job's input
// topics; the group (Kafka's own coordination, no other service) assigns
// each partition to one instance. A partition is a [Task]: the instance
// runs, for each task it is assigned, the job the caller builds for that
// one partition, as an ordinary exactly job of its own, with its own
// checkpoints under the job's checkpoint storage (object storage, so that
// any machine can take a task over), its own ownership lease and epoch, and
// its own sinks' transactions. When the assignment changes the tasks move:
// a revoked task is stopped cleanly before the group hands its partition
// on; the new owner restores the task's latest completed checkpoint,
// commits what it covers, aborts the rest and replays from its positions.
// An instance that was paused (SIGSTOP, a frozen VM) past its session and
// its lease finds its tasks owned by a higher epoch and commits nothing.
//
// A task reads one partition, so keyed state in a task sees only the keys
// of its partition: a job run by a cluster must key its state by the key
// the input topic is partitioned by (co-partitioned input, as in Kafka
// Streams). Jobs that re-key their input across instances need a
// repartition topic between stages: see docs/scale-out.md for the design
// and what is built.
package cluster
