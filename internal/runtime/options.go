package runtime

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/checkpoint/store"
	"github.com/exactlyonce/exactly/internal/vfs"
	"github.com/exactlyonce/exactly/state"
)

// Options configures a job run. It mirrors stream.Options field for field
// (stream converts with its Options.engine; its tests fail when the two
// differ), and the user-facing documentation of every field, with its
// default, is there: go doc github.com/exactlyonce/exactly/stream.Options.
// The zero value of every field means its default; [Options.withDefaults]
// sets them.
// DefaultCheckpointInterval is the checkpoint interval of a job that sets
// none.
const DefaultCheckpointInterval = time.Second

type Options struct {
	CheckpointDir               string        // where checkpoints are kept; required
	CheckpointInterval          time.Duration // between two checkpoint triggers; default 1s
	CheckpointTimeout           time.Duration // aborts an incomplete checkpoint; default 1m
	MinPauseBetweenCheckpoints  time.Duration // from a checkpoint's end to the next trigger; default 0
	CheckpointOnCaughtUp        time.Duration // a checkpoint this long after the last one ended once a source caught up after new input; 0: on the interval only
	RetainedCheckpoints         int           // completed checkpoints kept; default 3
	Parallelism                 int           // of operators that set none; default 1
	MaxParallelism              int           // the number of key groups; default 128
	RestoreFrom                 string        // a checkpoint or savepoint to start from when CheckpointDir has none newer
	RunFinished                 bool          // runs a finished job on from its final checkpoint
	SkipCorruptCheckpoints      bool          // falls back past completed checkpoints that do not verify
	Restart                     RestartStrategy
	BatchSize                   int           // records per batch between tasks; default 512
	ChannelCapacity             int           // batches a channel holds; default 8
	DebloatTarget               time.Duration // buffer debloating: the consumer's processing time the records queued on its input channels may hold; 0 off
	WatermarkInterval           time.Duration // how often sources send watermarks; default 200ms
	TolerableCheckpointFailures int           // failed checkpoints in a row before a failover; default 3, -1 never
	TakeOverSinks               bool          // a start without a checkpoint may write into another incarnation's sinks
	OwnershipLease              time.Duration // of CheckpointDir; default 10s
	OwnershipWait               time.Duration // for another owner at Start; default twice the lease, -1 forever
	CommitRetries               int           // retries of a failed commit; default 5
	CommitTimeout               time.Duration // of each call of the commit protocol; default CheckpointTimeout
	CheckTimeout                time.Duration // of the configuration checks at Start; default 30s, negative skips them
	StorageRequestTimeout       time.Duration // of each request to object storage, before its bytes' time; default 30s
	StorageMinTransferRate      int64         // bytes per second a request to object storage may not fall below; default 1 MiB/s
	Control                     ControlOptions
	Logger                      *slog.Logger                         // default slog.Default()
	Probe                       func(p ProbePoint, id checkpoint.ID) // called at the points of the checkpoint protocol

	fs    vfs.FS       // the checkpoint store's filesystem; nil: the OS's (tests inject errors)
	names *OptionNames // how messages spell options; nil: as Go fields (see WithOptionNames)
}

// RestartStrategy restarts a failed job with exponential backoff; see
// stream.RestartStrategy, which it mirrors, for its documentation.
type RestartStrategy struct {
	MaxAttempts    int           // restarts without a completed checkpoint in between; default 10, -1 none
	InitialBackoff time.Duration // before the first restart; default 100ms
	MaxBackoff     time.Duration // caps the wait; default 10s
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
		o.CheckpointInterval = DefaultCheckpointInterval
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
	if o.StorageRequestTimeout == 0 {
		o.StorageRequestTimeout = store.DefaultRequestTimeout
	}
	if o.StorageMinTransferRate == 0 {
		o.StorageMinTransferRate = store.DefaultMinTransferRate
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
		{o.CheckpointOnCaughtUp < 0, "CheckpointOnCaughtUp", o.CheckpointOnCaughtUp, "use 0 (checkpoints on the interval only) or a positive duration"},
		{o.RetainedCheckpoints < 0, "RetainedCheckpoints", o.RetainedCheckpoints, "keep at least 1"},
		{o.Parallelism < 0, "Parallelism", o.Parallelism, "use a positive count, at most MaxParallelism"},
		{o.MaxParallelism < 0 || o.MaxParallelism > 1<<15, "MaxParallelism", o.MaxParallelism, "use a value in [1, 32768]"},
		{o.Restart.MaxAttempts < -1, "Restart.MaxAttempts", o.Restart.MaxAttempts, "use -1 (no restarts), 0 (default) or a positive count"},
		{o.Restart.InitialBackoff < 0, "Restart.InitialBackoff", o.Restart.InitialBackoff, "use a positive duration"},
		{o.Restart.MaxBackoff < 0, "Restart.MaxBackoff", o.Restart.MaxBackoff, "use a positive duration"},
		{o.BatchSize < 0, "BatchSize", o.BatchSize, "use a positive size such as 512"},
		{o.ChannelCapacity < 0, "ChannelCapacity", o.ChannelCapacity, "use a positive count such as 8"},
		{o.DebloatTarget < 0, "DebloatTarget", o.DebloatTarget, "use 0 (off) or a positive duration such as 200ms"},
		{o.CommitRetries < 0, "CommitRetries", o.CommitRetries, "use 0 (default) or a positive count"},
		{o.CommitTimeout < 0, "CommitTimeout", o.CommitTimeout, "use 0 (default: CheckpointTimeout) or a positive duration such as 30s"},
		{o.OwnershipLease < 0, "OwnershipLease", o.OwnershipLease, "use 0 (default 10s) or a positive duration"},
		{o.OwnershipWait < -1, "OwnershipWait", o.OwnershipWait, "use -1 (wait as a standby), 0 (default: twice the lease) or a positive duration"},
		{o.TolerableCheckpointFailures < -1, "TolerableCheckpointFailures", o.TolerableCheckpointFailures, "use -1 (never fail over), 0 (default 3) or a positive count"},
		{o.WatermarkInterval < 0, "WatermarkInterval", o.WatermarkInterval, "use 0 (default 200ms) or a positive duration"},
		{o.StorageRequestTimeout < 0, "StorageRequestTimeout", o.StorageRequestTimeout, "use 0 (default 30s) or a positive duration"},
		{o.StorageMinTransferRate < 0, "StorageMinTransferRate", o.StorageMinTransferRate, "use 0 (default 1 MiB/s) or a positive number of bytes per second"},
	}
	for _, c := range checks {
		if c.bad {
			return fmt.Errorf("exactly: option %s = %v is invalid: %s", c.field, c.value, c.fix)
		}
	}
	return nil
}
