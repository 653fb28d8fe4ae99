package control

import "time"

// Version is the version of the JSON shape of every response. It changes
// only when a field changes meaning or goes away; new fields may appear in
// any version.
const Version = 1

// The states of a job, in [Status].State.
const (
	// StateRunning: an attempt of the job is running.
	StateRunning = "running"
	// StateRestarting: an attempt failed and the job waits to restart
	// from its latest checkpoint.
	StateRestarting = "restarting"
	// StateFinished: the job ended: its input was done and its output
	// committed, or it was stopped (Error says why when it failed).
	StateFinished = "finished"
	// StateFailed: the job ended with an error (see Error).
	StateFailed = "failed"
)

// Status is everything the API tells about a running job: GET /api/v1/job
// answers it whole, the other GET endpoints one part each.
type Status struct {
	Version int `json:"version"`
	// Job is the job's name.
	Job string `json:"job"`
	// State is one of the State constants.
	State string `json:"state"`
	// Error is why the job failed, or the last attempt's error while it
	// restarts; empty otherwise.
	Error string `json:"error,omitempty"`
	// Started is when this process started the job.
	Started time.Time `json:"started"`
	// Incarnation and Epoch identify the job's checkpoint storage and
	// this process's ownership of it.
	Incarnation string `json:"incarnation"`
	Epoch       uint64 `json:"epoch"`
	// Storage is the checkpoint storage's location.
	Storage string `json:"storage"`
	// RestoredFrom is the checkpoint the process started from, 0 when it
	// started from the beginning of its input.
	RestoredFrom uint64 `json:"restored_from"`
	// Graph is the job's operators and edges.
	Graph Graph `json:"graph"`
	// Operators are the live counters of every operator, in graph order.
	Operators []Operator `json:"operators"`
	// Checkpoints are the checkpoint history and the pending commits.
	Checkpoints Checkpoints `json:"checkpoints"`
	// Restarts are the failures the job restarted after, oldest first
	// (the latest [MaxRestarts]).
	Restarts []Restart `json:"restarts"`
	// Lag is the input not yet read, per source split, for the sources
	// that can tell it.
	Lag []SplitLag `json:"lag"`
	// Throughput is the history of the operators' rates, one point per
	// sampling interval of the server, oldest first (the latest
	// [MaxThroughputPoints]).
	Throughput []ThroughputPoint `json:"throughput"`
	// Configuration is the job's options that shape its run, as set or
	// defaulted (never a secret: tokens and credentials are left out).
	Configuration []Setting `json:"configuration"`
	// Cluster is set for an instance of a job run on a cluster: its tasks
	// and the group's assignment.
	Cluster *Cluster `json:"cluster,omitempty"`
}

// MaxThroughputPoints is how many points [Status].Throughput keeps: five
// minutes at the default sampling interval.
const MaxThroughputPoints = 300

// ThroughputPoint is the rates of every operator over one sampling
// interval, ending at Time.
type ThroughputPoint struct {
	Time      time.Time      `json:"time"`
	Operators []OperatorRate `json:"operators"`
}

// OperatorRate is an operator's records in and out per second.
type OperatorRate struct {
	Name         string  `json:"name"`
	InPerSecond  float64 `json:"in_per_second"`
	OutPerSecond float64 `json:"out_per_second"`
}

// Setting is one option of the job and its value, as text.
type Setting struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// MaxRestarts is how many restarts [Status].Restarts keeps.
const MaxRestarts = 32

// MaxCheckpoints is how many checkpoints [Checkpoints].History keeps.
const MaxCheckpoints = 64

// Graph is the job's dataflow graph.
type Graph struct {
	Nodes []Node `json:"nodes"`
	Edges []Edge `json:"edges"`
}

// Node is one operator of the graph.
type Node struct {
	// ID is the operator's index in the graph (its topological position).
	ID int `json:"id"`
	// Name is the operator's name, unique in the job.
	Name string `json:"name"`
	// Kind is "source", "operator" or "sink" (an operator no other reads).
	Kind string `json:"kind"`
	// Parallelism is its number of subtasks.
	Parallelism int `json:"parallelism"`
	// Keyed says its state is partitioned by key group.
	Keyed bool `json:"keyed"`
	// ChainedTo is the id of the operator whose task runs this one (it is
	// called directly, without a channel), -1 when it heads its own task.
	ChainedTo int `json:"chained_to"`
}

// Edge is a channel from one operator to another.
type Edge struct {
	From int `json:"from"`
	To   int `json:"to"`
	// Output is the producer's output it reads: 0 its main output, i > 0
	// its side output i.
	Output int `json:"output"`
	// Partitioning is "forward", "rebalance", "hash" or "broadcast".
	Partitioning string `json:"partitioning"`
}

// Operator holds the counters of one operator, over its subtasks. Counts
// start at 0 in every process and include records replayed after a
// restart.
type Operator struct {
	Name string `json:"name"`
	// RecordsIn counts the records it handled (a source: read).
	RecordsIn int64 `json:"records_in"`
	// RecordsOut counts the records it emitted on all its outputs.
	RecordsOut int64 `json:"records_out"`
	// InPerSecond and OutPerSecond are the rates over the server's last
	// sampling interval (0 until two samples exist).
	InPerSecond  float64 `json:"in_per_second"`
	OutPerSecond float64 `json:"out_per_second"`
	// LateRecords counts records an event-time operator found too late.
	LateRecords int64 `json:"late_records"`
	// EventTime is where the operator is in event time: the least
	// watermark of its subtasks that are not idle (Flink's low watermark).
	EventTime
	// Subtasks are the times of the tasks that run this operator; for a
	// chained operator, those of its chain's head.
	Subtasks []Subtask `json:"subtasks"`
}

// EventTime is where an operator or a subtask is in event time. A job
// without event time has none: every field is zero.
type EventTime struct {
	// Watermark is the last watermark passed on (an operator: the least of
	// its subtasks that are not idle); absent before every subtask passed
	// one on, and once the input ended.
	Watermark *time.Time `json:"watermark,omitempty"`
	// Idle: nothing holds event time back here (an idle source split, all
	// inputs idle; an operator: all its subtasks); consumers do not wait
	// for its watermark.
	Idle bool `json:"idle,omitempty"`
	// InputEnded: the input ended, and with it event time (an operator:
	// for all its subtasks).
	InputEnded bool `json:"input_ended,omitempty"`
}

// Subtask holds the time a task spent, cumulative over attempts, and the
// shares of the server's last sampling interval.
type Subtask struct {
	// Index is the subtask's index.
	Index int `json:"index"`
	// Task names the task, with its chain: "head[s] (head → next)".
	Task string `json:"task"`
	// BusyMillis is the time spent working: handling records, barriers
	// and timers, polling a source that had records.
	BusyMillis int64 `json:"busy_ms"`
	// BackpressuredMillis is the time spent waiting for room in a full
	// channel to a consumer.
	BackpressuredMillis int64 `json:"backpressured_ms"`
	// IdleMillis is the time spent waiting for input.
	IdleMillis int64 `json:"idle_ms"`
	// Busy and Backpressured are the shares of the last sampling interval
	// spent so, in [0, 1].
	Busy          float64 `json:"busy"`
	Backpressured float64 `json:"backpressured"`
	// EventTime is where the task is in event time.
	EventTime
}

// Checkpoints are the job's recent checkpoints and the commits they wait on.
type Checkpoints struct {
	// Completed and Aborted count the checkpoints and savepoints of this
	// process.
	Completed int64 `json:"completed"`
	Aborted   int64 `json:"aborted"`
	// History holds the latest [MaxCheckpoints], oldest first.
	History []Checkpoint `json:"history"`
	// Pending lists the sinks that have not yet committed what the latest
	// completed checkpoint covers.
	Pending []PendingCommit `json:"pending_commits"`
}

// The statuses of a checkpoint, in [Checkpoint].Status.
const (
	CheckpointInProgress = "in_progress"
	CheckpointCompleted  = "completed"
	CheckpointAborted    = "aborted"
)

// Checkpoint is one checkpoint or savepoint.
type Checkpoint struct {
	ID uint64 `json:"id"`
	// Kind is "checkpoint" or "savepoint".
	Kind string `json:"kind"`
	// Status is one of the Checkpoint constants.
	Status string `json:"status"`
	// Reason is why it was aborted.
	Reason string `json:"reason,omitempty"`
	// Triggered is when its barriers were injected.
	Triggered time.Time `json:"triggered"`
	// DurationMillis is the time from the trigger to its metadata written
	// (completed) or to its abort; 0 while in progress.
	DurationMillis int64 `json:"duration_ms"`
	// AlignmentMillis is the longest time a task with several inputs held
	// inputs blocked, waiting for the barrier on the others.
	AlignmentMillis int64 `json:"alignment_ms"`
	// StateBytes is the size of its state files, SharedBytes of the
	// shared files they refer to (incremental snapshots).
	StateBytes  int64 `json:"state_bytes"`
	SharedBytes int64 `json:"shared_bytes"`
	// Commits are the sinks' commits of what it covers.
	Commits []Commit `json:"commits"`
}

// Commit is one sink's commit of a completed checkpoint.
type Commit struct {
	Sink string `json:"sink"`
	// Subtasks is the sink's parallelism, Committed how many of its
	// subtasks committed.
	Subtasks  int `json:"subtasks"`
	Committed int `json:"committed"`
	// LatencyMillis is the time from the checkpoint's completion to the
	// last of its subtasks' commit returning.
	LatencyMillis int64 `json:"latency_ms"`
}

// PendingCommit is a sink whose subtasks have not all committed a
// completed checkpoint.
type PendingCommit struct {
	Checkpoint uint64 `json:"checkpoint"`
	Sink       string `json:"sink"`
	// Waiting is how many of its subtasks have not committed.
	Waiting int `json:"waiting"`
	// SinceMillis is the time since the checkpoint completed.
	SinceMillis int64 `json:"since_ms"`
}

// Restart is one failure the job restarted after.
type Restart struct {
	Time time.Time `json:"time"`
	// Attempt counts the restarts since a checkpoint last completed.
	Attempt int `json:"attempt"`
	// Error is the failure.
	Error string `json:"error"`
	// BackoffMillis is the wait before the restart.
	BackoffMillis int64 `json:"backoff_ms"`
}

// SplitLag is the input of one source split not yet read.
type SplitLag struct {
	Source  string `json:"source"`
	Subtask int    `json:"subtask"`
	// Split names the split: a Kafka topic and partition, a file.
	Split string `json:"split"`
	// Lag is how far the split's end is ahead of the source's position,
	// in the split's unit (Unit).
	Lag int64 `json:"lag"`
	// Unit is "records", "bytes" or "offsets".
	Unit string `json:"unit"`
}
