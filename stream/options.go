package stream

import (
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/runtime"
)

// Options configures a run of a job ([Job.Run], [Job.Start]): checkpoint
// storage and interval, ownership, restarts, logging. Only CheckpointDir
// is required; the zero value of every other field means the default its
// comment names.
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
	// CheckpointOnCaughtUp, when positive, also triggers a checkpoint as
	// soon as a source has read all the input visible to it after reading
	// new input, once this long has passed since the last checkpoint
	// ended (and MinPauseBetweenCheckpoints): output that new input
	// produced is committed about this pause after the input arrived,
	// instead of up to a whole interval later. It costs more checkpoints
	// while input arrives in bursts. A job run in stages on a cluster sets
	// it for every stage after the first (cluster.Options.StagePause),
	// whose input arrives when the stage before commits. Default 0: on the
	// interval only.
	CheckpointOnCaughtUp time.Duration
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
	// latest checkpoint instead of replaying from the savepoint. Default
	// empty: the job resumes from the latest checkpoint in CheckpointDir,
	// or starts fresh if there is none.
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
	// Restart decides whether and when a failed job is restarted. Default:
	// up to 10 restarts without a checkpoint completing in between, after
	// a backoff from 100ms to 10s (see [RestartStrategy]).
	Restart RestartStrategy
	// BatchSize is the number of records per batch between tasks. Default 512.
	BatchSize int
	// ChannelCapacity is the number of batches a channel between two tasks
	// holds before the producer blocks. Default 8.
	ChannelCapacity int
	// DebloatTarget turns on buffer debloating: each task measures how
	// many records it processes per second of work and has its producers
	// send it batches small enough that its full input channels hold
	// about DebloatTarget of its processing (at least 16 records a batch,
	// at most BatchSize). Under backpressure a checkpoint barrier then
	// waits about that long behind the queued records at each task
	// instead of ChannelCapacity full batches' worth, so checkpoints keep
	// completing with a slow sink (docs/operations.md, "Backpressure").
	// Default 0: off, every batch up to BatchSize.
	DebloatTarget time.Duration
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
	// configuration that Start runs while it opens its checkpoint storage
	// (reachable services, existing topics and tables, accepted
	// credentials: see [Checker]). A check without an answer within it
	// fails the start. Default 30s; negative skips the checks.
	CheckTimeout time.Duration
	// StorageRequestTimeout bounds each request to object storage (an
	// s3:// CheckpointDir), plus the time its bytes take at
	// StorageMinTransferRate: a slower request fails, and the checkpoint or
	// restore that made it is retried. Default 30s. Local directories have
	// no timeout.
	StorageRequestTimeout time.Duration
	// StorageMinTransferRate is the slowest transfer, in bytes per second,
	// that a request moving state to or from object storage may take: a
	// request moving n bytes gets StorageRequestTimeout + n /
	// StorageMinTransferRate, so a large object of state is not cut off by
	// a timeout sized for small ones. Default 1 MiB/s (a 5 GiB object gets
	// 30 s + 85 min). Large objects go up in parts (multipart uploads).
	StorageMinTransferRate int64
	// Control serves the job's control API, its Prometheus metrics and
	// its web page over HTTP. Default off: nothing is served unless
	// Control.Addr is set. See [ControlOptions].
	Control ControlOptions
	// Logger receives the job's logs. Default slog.Default().
	Logger *slog.Logger
	// Probe, when set, is called at the points of the checkpoint protocol
	// named by [ProbePoint], synchronously. It is for tests and fault
	// injection: a crash test kills the process from here. Default nil.
	Probe func(p ProbePoint, id checkpoint.ID)

	// edits set the engine's unexported options (how its messages spell
	// options, for the pipeline runner; the filesystem, for tests): added
	// by runtime.EditOptions, applied in order by engine.
	edits []func(*runtime.Options)
}

// RestartStrategy restarts a failed job with exponential backoff
// ([Options].Restart). The zero value is the default strategy.
type RestartStrategy struct {
	// MaxAttempts is the number of restarts allowed without a checkpoint
	// completing in between. Default 10; -1 disables restarts.
	MaxAttempts int
	// InitialBackoff is the wait before the first restart; each further
	// restart waits twice the previous one. Default 100ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait. Default 10s.
	MaxBackoff time.Duration
}

// ControlOptions configure the HTTP control API, Prometheus metrics and
// web page of a running job ([Options].Control; package control,
// docs/operations.md). The zero value serves nothing.
type ControlOptions struct {
	// Addr is the host:port to serve on. Default empty: nothing is
	// served. It must be a loopback address, such as 127.0.0.1:8081,
	// unless a token is set: a non-loopback address without one is
	// refused at Start. Port 0 picks a free port; [Running.ControlAddr]
	// tells which.
	Addr string
	// TokenFile is a file holding the bearer token that the calls that
	// change the job (savepoint, stop) need; read once at Start. Default
	// empty: without a token (here or in TokenEnv) the API is read-only.
	TokenFile string
	// TokenEnv is the name of an environment variable holding the token,
	// instead of TokenFile. Default empty.
	TokenEnv string
	// Metrics, when set, makes the handler of GET /metrics from the job's
	// name and metrics: pass metrics.Handler for Prometheus. Default nil:
	// GET /metrics answers 404, and the core packages link no Prometheus
	// code.
	Metrics func(job string, m *Metrics) http.Handler
}

func init() {
	// runtime.WithOptionNames (the pipeline runner's) and runtime's test
	// hooks edit Options through runtime.EditOptions, which cannot name
	// this package's Options.
	runtime.RegisterStreamOptions(func(o any, edit func(*runtime.Options)) (any, bool) {
		so, ok := o.(Options)
		if ok {
			// Clipped: a copy of o that is edited too must not share
			// the new edit.
			so.edits = append(slices.Clip(so.edits), edit)
		}
		return so, ok
	})
}

// engine returns o as the engine takes it. Every field is copied: the
// tests TestOptionsMirrorTheEngine and TestOptionsConvertEveryField fail
// when a field is added on one side only, or not copied here.
func (o Options) engine() runtime.Options {
	e := runtime.Options{
		CheckpointDir:               o.CheckpointDir,
		CheckpointInterval:          o.CheckpointInterval,
		CheckpointTimeout:           o.CheckpointTimeout,
		MinPauseBetweenCheckpoints:  o.MinPauseBetweenCheckpoints,
		CheckpointOnCaughtUp:        o.CheckpointOnCaughtUp,
		RetainedCheckpoints:         o.RetainedCheckpoints,
		Parallelism:                 o.Parallelism,
		MaxParallelism:              o.MaxParallelism,
		RestoreFrom:                 o.RestoreFrom,
		RunFinished:                 o.RunFinished,
		SkipCorruptCheckpoints:      o.SkipCorruptCheckpoints,
		Restart:                     o.Restart.engine(),
		BatchSize:                   o.BatchSize,
		ChannelCapacity:             o.ChannelCapacity,
		DebloatTarget:               o.DebloatTarget,
		WatermarkInterval:           o.WatermarkInterval,
		TolerableCheckpointFailures: o.TolerableCheckpointFailures,
		TakeOverSinks:               o.TakeOverSinks,
		OwnershipLease:              o.OwnershipLease,
		OwnershipWait:               o.OwnershipWait,
		CommitRetries:               o.CommitRetries,
		CommitTimeout:               o.CommitTimeout,
		CheckTimeout:                o.CheckTimeout,
		StorageRequestTimeout:       o.StorageRequestTimeout,
		StorageMinTransferRate:      o.StorageMinTransferRate,
		Control:                     o.Control.engine(),
		Logger:                      o.Logger,
		Probe:                       o.Probe,
	}
	for _, edit := range o.edits {
		edit(&e)
	}
	return e
}

// engine returns r as the engine takes it.
func (r RestartStrategy) engine() runtime.RestartStrategy {
	return runtime.RestartStrategy{
		MaxAttempts:    r.MaxAttempts,
		InitialBackoff: r.InitialBackoff,
		MaxBackoff:     r.MaxBackoff,
	}
}

// engine returns c as the engine takes it.
func (c ControlOptions) engine() runtime.ControlOptions {
	return runtime.ControlOptions{
		Addr:      c.Addr,
		TokenFile: c.TokenFile,
		TokenEnv:  c.TokenEnv,
		Metrics:   c.Metrics,
	}
}
