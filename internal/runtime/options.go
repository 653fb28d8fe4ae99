package runtime

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/vfs"
	"github.com/exactlyonce/exactly/state"
)

// Options configures a job run. The zero value of every field means its
// default; [Options.withDefaults] documents them in one place.
type Options struct {
	// CheckpointDir is where checkpoints are kept. Required. A local
	// directory (a plain path or file:///path), or S3-compatible object
	// storage: s3://bucket/prefix?endpoint=host:port&region=region, with
	// credentials from the standard AWS environment variables or
	// ~/.aws/credentials (never from the URL). Object storage survives the
	// loss of the machine: a job restarted anywhere resumes from it. See
	// docs/state.md.
	CheckpointDir string
	// CheckpointInterval is the time between two checkpoint triggers; output
	// becomes visible at this pace. Default 1s.
	CheckpointInterval time.Duration
	// CheckpointTimeout aborts a checkpoint not complete this long after its
	// trigger. Default 1m.
	CheckpointTimeout time.Duration
	// MinPauseBetweenCheckpoints is the least time from the end of one
	// checkpoint to the next trigger. Default 0.
	MinPauseBetweenCheckpoints time.Duration
	// RetainedCheckpoints is how many completed checkpoints are kept. Default 3.
	RetainedCheckpoints int
	// Parallelism is the parallelism of operators that set none and do not
	// inherit their input's. Default 1.
	Parallelism int
	// MaxParallelism is the number of key groups; it bounds every
	// operator's parallelism and cannot change once a checkpoint exists.
	// Default 128.
	MaxParallelism int
	// RestoreFrom is a checkpoint or savepoint directory to start from, used
	// only when CheckpointDir holds no newer checkpoint of the job (as in
	// Flink): a process restarted with the same options resumes from its
	// latest checkpoint instead of replaying from the savepoint. When empty
	// the job resumes from the latest checkpoint in CheckpointDir, or starts
	// fresh if there is none.
	RestoreFrom string
	// RunFinished runs a job whose latest checkpoint is the final
	// checkpoint of its input (a bounded run that ended) on from that
	// checkpoint, for instance after new files arrived or after its source
	// was made unbounded (see the source's options for reading past a
	// bounded end). Without it such a start commits what that checkpoint
	// covers, logs that the job finished, and runs nothing: pending
	// processing-time timers stay unfired and no output is written twice.
	// Default false.
	RunFinished bool
	// SkipCorruptCheckpoints lets the job fall back past completed
	// checkpoints that do not verify (a flipped byte, a lost file) to the
	// newest one that does, with a loud warning each, counted by
	// Metrics.SkippedCheckpoints. Default false: the job stops with an
	// error naming the file, because the skipped checkpoint's output may
	// be committed already and falling back writes it again. Checkpoints
	// that never completed are always skipped quietly.
	SkipCorruptCheckpoints bool
	// Restart decides whether and when a failed job is restarted.
	Restart RestartStrategy
	// BatchSize is the number of records per batch between tasks. Default 512.
	BatchSize int
	// ChannelCapacity is the number of batches a channel between two tasks
	// holds before the producer blocks. Default 8.
	ChannelCapacity int
	// WatermarkInterval is how often a source subtask that tracks event
	// time sends its watermark and idleness downstream, when they changed:
	// once per interval of wall-clock time, or as soon as the watermark is
	// an interval of event time past the last one sent (a backlog read
	// faster than real time); the end of a bounded input is sent at once.
	// Default 200ms.
	WatermarkInterval time.Duration
	// TolerableCheckpointFailures is how many checkpoints in a row may fail
	// (time out, be declined) before the job fails over and restarts from
	// its latest checkpoint, with an error naming the subtask that did not
	// acknowledge. Default 3; -1 never fails over for failed checkpoints.
	TolerableCheckpointFailures int
	// TakeOverSinks lets a job that starts without a checkpoint write into
	// sinks that hold the progress of another incarnation of the job (a
	// rerun from scratch into the same tables, after the checkpoint
	// directory was lost or deliberately emptied). Without it such a start
	// fails with an error wrapping sink.ErrForeignProgress, because
	// reprocessing from scratch writes the old output again. Default false.
	TakeOverSinks bool
	// OwnershipLease is how long this process's ownership of CheckpointDir
	// lasts without renewal (renewed every third of it). Another instance
	// started on the same directory waits while the lease is renewed; when
	// this process dies the next one takes over at once, and when it is
	// paused (SIGSTOP, a frozen VM) longer than the lease, the next one
	// takes over with a higher epoch and this process can then complete no
	// checkpoint and commit nothing. Default 10s.
	OwnershipLease time.Duration
	// OwnershipWait is how long Start waits for another live owner of
	// CheckpointDir before failing with an error naming it. Default twice
	// OwnershipLease; -1 waits until the context ends (a standby instance).
	OwnershipWait time.Duration
	// CommitRetries is how many times a failed commit is retried, with
	// exponential backoff from 50ms, before the attempt fails. Default 5.
	CommitRetries int
	// CommitTimeout bounds each call of the commit protocol to a sink
	// (fencing at a start, a commit, an abort): a call without an answer
	// within it is cancelled and fails, and is retried as a failed commit
	// is. A network that holds a connection's packets without closing it
	// would otherwise hang a restore, which no checkpoint timeout covers.
	// Default CheckpointTimeout.
	CommitTimeout time.Duration
	// CheckTimeout bounds the checks of the sources' and sinks'
	// configuration that Start runs while it opens its checkpoint storage (reachable
	// services, existing topics and tables, accepted credentials: see
	// stream.Checker). A check without an answer within it fails the
	// start. Default 30s; negative skips the checks.
	CheckTimeout time.Duration
	// Control serves the job's control API, its Prometheus metrics and
	// its web page over HTTP; off unless Control.Addr is set. See
	// [ControlOptions].
	Control ControlOptions
	// Logger receives the job's logs. Default slog.Default().
	Logger *slog.Logger
	// Probe, when set, is called at the points of the checkpoint protocol
	// named by [ProbePoint], synchronously. It is for tests and fault
	// injection: a crash test kills the process from here.
	Probe func(p ProbePoint, id checkpoint.ID)

	fs    vfs.FS       // the checkpoint store's filesystem; nil: the OS's (tests inject errors)
	names *OptionNames // how messages spell options; nil: as Go fields (see WithOptionNames)
}

// RestartStrategy restarts a failed job with exponential backoff.
type RestartStrategy struct {
	// MaxAttempts is the number of restarts allowed without a checkpoint
	// completing in between; 0 means the default, 10; -1 disables restarts.
	MaxAttempts int
	// InitialBackoff is the wait before the first restart. Default 100ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait. Default 10s.
	MaxBackoff time.Duration
}

// ProbePoint names a point of the checkpoint protocol.
type ProbePoint string

const (
	// ProbeBarrierInjected: a source subtask emitted a barrier.
	ProbeBarrierInjected ProbePoint = "barrier-injected"
	// ProbeSnapshotTaken: a subtask took its synchronous snapshot (sinks prepared).
	ProbeSnapshotTaken ProbePoint = "snapshot-taken"
	// ProbeMetadataWritten: the metadata is durable, the checkpoint complete,
	// and no subtask has been told yet. A crash here must not lose the commit.
	ProbeMetadataWritten ProbePoint = "metadata-written"
	// ProbeCommitted: a subtask with a checkpoint listener (a sink) has
	// committed what a checkpoint covers.
	ProbeCommitted ProbePoint = "committed"
)

func (o Options) withDefaults() Options {
	if o.CheckpointInterval == 0 {
		o.CheckpointInterval = time.Second
	}
	if o.CheckpointTimeout == 0 {
		o.CheckpointTimeout = time.Minute
	}
	if o.RetainedCheckpoints == 0 {
		o.RetainedCheckpoints = 3
	}
	if o.Parallelism == 0 {
		o.Parallelism = 1
	}
	if o.MaxParallelism == 0 {
		o.MaxParallelism = state.DefaultMaxParallelism
	}
	if o.Restart.MaxAttempts == 0 {
		o.Restart.MaxAttempts = 10
	}
	if o.Restart.InitialBackoff == 0 {
		o.Restart.InitialBackoff = 100 * time.Millisecond
	}
	if o.Restart.MaxBackoff == 0 {
		o.Restart.MaxBackoff = 10 * time.Second
	}
	if o.BatchSize == 0 {
		o.BatchSize = 512
	}
	if o.ChannelCapacity == 0 {
		o.ChannelCapacity = 8
	}
	if o.CommitRetries == 0 {
		o.CommitRetries = 5
	}
	if o.CheckTimeout == 0 {
		o.CheckTimeout = 30 * time.Second
	}
	if o.CommitTimeout == 0 {
		o.CommitTimeout = o.CheckpointTimeout
	}
	if o.TolerableCheckpointFailures == 0 {
		o.TolerableCheckpointFailures = 3
	}
	if o.WatermarkInterval == 0 {
		o.WatermarkInterval = 200 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// commitPolicy returns the commit options as operators get them.
func (o Options) commitPolicy() CommitPolicy {
	return CommitPolicy{Retries: o.CommitRetries, Timeout: o.CommitTimeout}
}

// validate reports the first invalid option, naming the field, the value and the fix.
func (o Options) validate() error {
	checks := []struct {
		bad   bool
		field string
		value any
		fix   string
	}{
		{o.CheckpointDir == "", "CheckpointDir", `""`, "set it to a directory on durable storage, or to s3://bucket/prefix"},
		{o.CheckpointInterval < 0, "CheckpointInterval", o.CheckpointInterval, "use a positive duration such as 1s"},
		{o.CheckpointTimeout < 0, "CheckpointTimeout", o.CheckpointTimeout, "use a positive duration such as 1m"},
		{o.MinPauseBetweenCheckpoints < 0, "MinPauseBetweenCheckpoints", o.MinPauseBetweenCheckpoints, "use 0 or a positive duration"},
		{o.RetainedCheckpoints < 0, "RetainedCheckpoints", o.RetainedCheckpoints, "keep at least 1"},
		{o.Parallelism < 0, "Parallelism", o.Parallelism, "use a positive count, at most MaxParallelism"},
		{o.MaxParallelism < 0 || o.MaxParallelism > 1<<15, "MaxParallelism", o.MaxParallelism, "use a value in [1, 32768]"},
		{o.Restart.MaxAttempts < -1, "Restart.MaxAttempts", o.Restart.MaxAttempts, "use -1 (no restarts), 0 (default) or a positive count"},
		{o.Restart.InitialBackoff < 0, "Restart.InitialBackoff", o.Restart.InitialBackoff, "use a positive duration"},
		{o.Restart.MaxBackoff < 0, "Restart.MaxBackoff", o.Restart.MaxBackoff, "use a positive duration"},
		{o.BatchSize < 0, "BatchSize", o.BatchSize, "use a positive size such as 512"},
		{o.ChannelCapacity < 0, "ChannelCapacity", o.ChannelCapacity, "use a positive count such as 8"},
		{o.CommitRetries < 0, "CommitRetries", o.CommitRetries, "use 0 (default) or a positive count"},
		{o.CommitTimeout < 0, "CommitTimeout", o.CommitTimeout, "use 0 (default: CheckpointTimeout) or a positive duration such as 30s"},
		{o.OwnershipLease < 0, "OwnershipLease", o.OwnershipLease, "use 0 (default 10s) or a positive duration"},
		{o.OwnershipWait < -1, "OwnershipWait", o.OwnershipWait, "use -1 (wait as a standby), 0 (default: twice the lease) or a positive duration"},
		{o.TolerableCheckpointFailures < -1, "TolerableCheckpointFailures", o.TolerableCheckpointFailures, "use -1 (never fail over), 0 (default 3) or a positive count"},
		{o.WatermarkInterval < 0, "WatermarkInterval", o.WatermarkInterval, "use 0 (default 200ms) or a positive duration"},
	}
	for _, c := range checks {
		if c.bad {
			return fmt.Errorf("exactly: option %s = %v is invalid: %s", c.field, c.value, c.fix)
		}
	}
	return nil
}
