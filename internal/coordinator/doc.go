// Package coordinator holds the checkpoint coordinator and the recovery
// decision of a job, the engine's two pure state machines. They are the
// engine's (package internal/runtime drives them); package checkpoint holds
// the types users and the storage share.
//
// The [Coordinator] is a pure state machine in the style of etcd's raft: it
// reads no clock, starts no goroutine and does no I/O. Its caller (the job
// driver in package internal/runtime) feeds it events — a tick with the current time,
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
// declines, or for which no id could be reserved, is aborted ([Abort]); the
// next checkpoint covers the longer span. More than
// [Config].TolerableFailures such failures in a row ask for a failover
// ([FailOver]) whose error names the subtasks that did not acknowledge.
//
// A failed metadata write is never an abort: it may still have made the
// checkpoint complete in storage. The coordinator enters the "outcome
// unknown" state and asks for a [FailOver] with OutcomeUnknown set: the
// driver must then abort nothing (a clean stop would abort the transactions
// the checkpoint covers) and recovery reads the storage to decide. A write
// the storage refused because another process owns the job is reported with
// [Coordinator.Fenced]: nothing was written, the checkpoint is aborted, and
// the job stops.
//
// # The recovery decision
//
// [Recovery] is the second pure state machine: after every attempt of the
// job the driver reports how it ended ([AttemptEnd]: succeeded, transient,
// permanent, fenced or stopped; whether a checkpoint, a final checkpoint,
// or a checkpoint of unknown outcome was reached), and Recovery decides
// ([Decision]) whether to restart, after which backoff, from which
// checkpoint (the same, the last completed, or the latest in storage), and
// whether only commits are left. Its scripts are testdata/recovery_*.txt.
package coordinator
