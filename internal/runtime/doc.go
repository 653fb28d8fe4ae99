// Package runtime executes a dataflow graph with exactly-once checkpoints.
//
// # Execution model
//
// A [Graph] is a list of operators in topological order. Operators joined by
// a forward edge with equal parallelism (and no other input) are chained:
// they run in the same goroutine and hand batches to each other by direct
// calls. Every chain runs as one task per parallel subtask. Tasks exchange
// batches through bounded channels, one channel per (producer subtask,
// consumer subtask, edge), so a slow consumer backpressures its producers.
// Channels carry batches, never single records; checkpoint barriers and the
// end-of-stream marker travel in-band between batches.
//
// # Checkpoints
//
// The job driver owns a [coordinator.Coordinator] and feeds it ticks and
// acknowledgements. To take checkpoint N it asks every source subtask, via
// its mailbox, to record its split positions and emit barrier N. A task with
// several input channels aligns: once barrier N arrived on a channel it stops
// reading that channel until barrier N arrived on every other one. Then it
// snapshots every operator of its chain synchronously (cheap copies; sinks
// prepare their transactions here), forwards the barrier, and writes the
// state files on another goroutine while processing continues; when they
// are durable it acknowledges. The driver writes the metadata when every
// subtask acknowledged; only then is the checkpoint complete, and only then
// are the tasks told to commit.
//
// Ordering rules kept here:
//
//   - A sink's Prepare happens before its subtask acknowledges.
//   - Commit happens only after the metadata of a checkpoint covering the
//     committable is durable.
//   - On restore, every sink fences earlier owners first; then the
//     committables of the restored checkpoint are committed and lingering
//     transactions aborted, before any task starts.
//
// # Failures
//
// Any task error fails the whole attempt: every task is cancelled and the
// job restarts from the latest completed checkpoint after a backoff, until
// the restart strategy gives up or the error is marked permanent. The
// decision is [coordinator.Recovery]'s, a pure state machine.
//
// # Where things are
//
//   - job.go: the public handle ([Start], [Run], [Job.Wait]) and the
//     ownership of the checkpoint directory; metrics.go its counters;
//     savepoint.go savepoints.
//   - restore_point.go, restore.go: which checkpoint an attempt restores,
//     and reading it; restore_sinks.go: fencing and committing the sinks
//     before an attempt.
//   - failover.go: attempts one after another, as [coordinator.Recovery]
//     decides; attempt.go: one attempt; driver.go: the attempt's loop
//     around the [coordinator.Coordinator].
//   - mailbox.go and events.go: what the driver tells a task and what a
//     task tells the driver.
//   - task.go: a task and its chain; source_task.go and operator_task.go
//     their two loops; aligner.go the barrier alignment, a pure state
//     machine tested by the scripts in testdata/aligner_*.txt;
//     snapshot.go taking a checkpoint in a task.
//   - graph.go, validate.go, build.go: the graph, its validation and how
//     it becomes tasks; operator.go: the interfaces operators implement;
//     router.go and watermark.go: what travels between tasks.
package runtime
