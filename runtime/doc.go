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
// The job driver owns a [checkpoint.Coordinator] and feeds it ticks and
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
//   - On restore, the committables of the restored checkpoint are committed
//     and lingering transactions aborted before any task starts.
//
// # Failures
//
// Any task error fails the whole attempt: every task is cancelled and the
// job restarts from the latest completed checkpoint after a backoff, until
// the restart strategy gives up or the error is marked permanent.
package runtime
