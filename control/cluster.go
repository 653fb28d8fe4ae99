package control

import "time"

// Cluster is the part of the status of one instance of a job run on a
// cluster (package cluster): the tasks this instance runs and the group's
// whole assignment. [Status].Cluster is nil for a job in one process.
type Cluster struct {
	// Group is the Kafka consumer group the instances share.
	Group string `json:"group"`
	// Member is this instance's member id in the group ("" before it
	// joined).
	Member string `json:"member"`
	// Tasks are this instance's tasks, in the order of their topics and
	// partitions.
	Tasks []Task `json:"tasks"`
	// Assignment is the group's assignment as the broker last described
	// it, one entry per member, this one included; empty until the first
	// answer.
	Assignment []Member `json:"assignment"`
	// AssignmentTime is when the broker described it; AssignmentError is
	// why the latest description failed, if it did.
	AssignmentTime  time.Time `json:"assignment_time"`
	AssignmentError string    `json:"assignment_error,omitempty"`
}

// The states of a task, in [Task].State.
const (
	// TaskStarting: the task's job waits for its checkpoint storage (the
	// previous owner's lease) or restores.
	TaskStarting = "starting"
	// TaskRunning: the task's job runs.
	TaskRunning = "running"
	// TaskStopping: revoked, lost or shutting down, committing what its
	// last checkpoint covers.
	TaskStopping = "stopping"
	// TaskParked: failed; kept, not run again, until a rebalance takes its
	// partition away (Error says why).
	TaskParked = "parked"
)

// Task is one task of an instance: one partition of its stage's topic.
type Task struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Stage is the task's stage in a job cut into stages (0 reads the
	// job's input topics); -1 for a job whose tasks are built by hand.
	Stage int `json:"stage"`
	// State is one of the Task constants.
	State string `json:"state"`
	// Since is when its current run started, or when it was parked.
	Since time.Time `json:"since"`
	// Runs counts the runs of the task this instance started.
	Runs int `json:"runs"`
	// Epoch is the current run's ownership epoch of the task's checkpoint
	// storage (0 until it owns it); a higher epoch fenced every earlier
	// owner.
	Epoch uint64 `json:"epoch"`
	// Checkpoint is the current run's last completed checkpoint, 0 before
	// its first; CheckpointTime is when it completed.
	Checkpoint     uint64    `json:"checkpoint"`
	CheckpointTime time.Time `json:"checkpoint_time,omitzero"`
	// Restarts counts the current run's restarts after failures.
	Restarts int `json:"restarts"`
	// Error is a parked task's failure, or the current run's last error
	// while it restarts.
	Error string `json:"error,omitempty"`
}

// Member is one member of the group and the tasks the group assigned it.
type Member struct {
	// Member is its member id, Client its client id, Host the address the
	// broker sees it at.
	Member string `json:"member"`
	Client string `json:"client"`
	Host   string `json:"host"`
	// Tasks are its partitions, as "topic/partition", sorted.
	Tasks []string `json:"tasks"`
}
