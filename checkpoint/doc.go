// Package checkpoint holds the checkpoint coordinator and the checkpoint
// metadata format.
//
// The [Coordinator] is a pure state machine in the style of etcd's raft: it
// reads no clock, starts no goroutine and does no I/O. Its caller (the job
// driver in package runtime) feeds it events — a tick with the current time,
// a subtask's acknowledgement, the result of a metadata write — and carries
// out the [Action]s it returns, in order.
//
// # Lifecycle of one checkpoint
//
//  1. The coordinator decides a checkpoint is due (interval elapsed, minimum
//     pause respected, none in flight) or a savepoint was requested, and
//     returns [ReserveID]. The driver durably reserves a fresh id (ids never
//     repeat, across restarts too) and calls [Coordinator.Begin], or
//     [Coordinator.BeginFailed] if the reservation failed.
//  2. Begin returns [InjectBarriers]: the driver tells every source subtask to
//     record its position and emit the barrier in-band.
//  3. Every subtask snapshots its state when the barrier has reached it on all
//     inputs, writes its state files and acknowledges with [Coordinator.Ack].
//  4. When every subtask has acknowledged, the coordinator returns
//     [PersistMetadata]. The driver writes the metadata durably (write, fsync,
//     rename, fsync the directory) and reports with
//     [Coordinator.MetadataPersisted].
//  5. Only then is the checkpoint complete: the coordinator returns
//     [NotifyComplete], and the driver tells every subtask, so that sinks
//     commit what the checkpoint covers.
//
// A checkpoint that is not complete within the timeout, that a subtask
// declines, or whose metadata cannot be written, is aborted ([Abort]); the
// next checkpoint covers the longer span. The runtime's driver does not
// report a failed metadata write to the coordinator: a failed write may
// still have made the checkpoint complete on disk, so it fails over and
// restores from the latest checkpoint on disk instead.
package checkpoint
