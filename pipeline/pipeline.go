// Package pipeline runs exactly-once jobs described in YAML, without Go: a
// source (kafka, file, generator), a decoder (json, csv, raw), transforms
// (filter and map with expr-lang expressions, key_by with count, sum, min,
// max and avg aggregates, per record or per tumbling, sliding or session
// window), a sink (kafka, postgres, file, sqlite) and a dead-letter sink.
//
// [Parse] checks a file completely — its YAML, every field against the
// schema, and every expression compiled and type-checked against the
// fields of the records it sees — and reports each problem with its
// file:line:col and the fix. [Pipeline.Run] maps the pipeline onto the
// library (package stream and the connectors) and runs it: a pipeline is a
// thin layer over the same engine, with the same guarantees.
//
// docs/pipelines.md, the reference of the file format, is generated from
// the schema the decoder uses (go generate ./pipeline).
package pipeline

//go:generate go run ./internal/gendoc -o ../docs/pipelines.md

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync/atomic"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/cluster"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/runtime"
	"github.com/exactlyonce/exactly/pipeline/internal/config"
	"github.com/exactlyonce/exactly/pipeline/internal/yamlconf"
	"github.com/exactlyonce/exactly/stream"
)

// Pipeline is a checked pipeline file, ready to run.
type Pipeline struct {
	plan    *plan
	stopped atomic.Bool
}

// Load reads and checks the pipeline file at path, substituting ${VAR}
// from the process's environment.
func Load(path string) (*Pipeline, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("pipeline: %w: give the path of a pipeline YAML file", err)
	}
	return Parse(path, data, os.LookupEnv)
}

// Parse checks the pipeline in data, the contents of the file named file
// (for messages). env looks up the variables of ${VAR}. A non-nil error
// lists every problem found, one per line, each as file:line:col: what is
// wrong and how to fix it.
func Parse(file string, data []byte, env func(string) (string, bool)) (*Pipeline, error) {
	var cfg config.Pipeline
	doc, err := yamlconf.Decode(file, data, &cfg, env)
	if err != nil {
		return nil, err
	}
	p, err := compile(&cfg, doc)
	if err != nil {
		return nil, err
	}
	p.checking = true
	_, err = p.build() // the connectors check their options
	p.checking = false
	if err != nil {
		var e *yamlconf.Error
		if errors.As(err, &e) {
			return nil, yamlconf.Errors{e}
		}
		return nil, err
	}
	return &Pipeline{plan: p}, nil
}

// Name returns the pipeline's name, the job's.
func (p *Pipeline) Name() string { return p.plan.cfg.Name }

// Describe summarizes the pipeline in a few lines: its sources, steps and
// sinks, with the fields of their records.
func (p *Pipeline) Describe() string {
	pl := p.plan
	var b strings.Builder
	if pl.cfg.Source != nil {
		fmt.Fprintf(&b, "pipeline %q: %s source, records %s\n", pl.cfg.Name, pl.cfg.Source.Kind, pl.inputs[0].schema.Describe())
		describeSteps(&b, pl.streams[0], "  ")
		fmt.Fprintf(&b, "  → %s sink, records %s\n", pl.cfg.Sink.Kind, pl.streams[0].output.Describe())
		if pl.cfg.DeadLetters != nil {
			fmt.Fprintf(&b, "  → dead letters to a %s sink\n", pl.cfg.DeadLetters.Kind)
		}
	} else {
		fmt.Fprintf(&b, "pipeline %q:\n", pl.cfg.Name)
		for _, in := range pl.inputs {
			fmt.Fprintf(&b, "  input %s: %s source, records %s\n", in.name, in.cfg.Kind, in.schema.Describe())
		}
		for _, sp := range pl.streams {
			fmt.Fprintf(&b, "  stream %s from %s, records %s\n", sp.name, strings.Join(sp.from, ", "), sp.output.Describe())
			describeSteps(&b, sp, "    ")
		}
		for _, o := range pl.outputs {
			fmt.Fprintf(&b, "  output %s: %s to a %s sink\n", o.name, o.from, o.sink.cfg.Kind)
		}
	}
	fmt.Fprintf(&b, "  checkpoints every %v in %s, state on the %s\n", pl.cfg.Checkpoint.Interval, pl.cfg.Checkpoint.Storage, pl.cfg.State.Backend)
	return b.String()
}

// describeSteps writes a line per step of sp, indented.
func describeSteps(b *strings.Builder, sp *streamPlan, indent string) {
	for _, st := range sp.steps {
		fmt.Fprintf(b, "%s%s: %s\n", indent, st.what, st.describe())
	}
}

// RunOptions are the options of a run that do not belong in the file.
type RunOptions struct {
	// Logger receives the job's logs. Default: slog.Default().
	Logger *slog.Logger
	// Probe, when set, sees the points of the checkpoint protocol (crash
	// tests kill the process there).
	Probe func(stream.ProbePoint, checkpoint.ID)
	// RestoreFrom is a savepoint or checkpoint to start from when the
	// pipeline's checkpoint storage holds none of its own
	// (stream.Options.RestoreFrom).
	RestoreFrom string
	// Control serves the running job's control API and web page
	// (stream.Options.Control); off when Control.Addr is empty.
	Control stream.ControlOptions
	// Started, when set, is called once the job runs, with the address of
	// its control API ("" without one).
	Started func(controlAddr string)
	// RunFinished runs a pipeline whose last checkpoint is the final one
	// of its input on from there, for new input (stream.Options.RunFinished;
	// exactly run --run-finished).
	RunFinished bool
	// TakeOverSinks lets a run without a checkpoint write into sinks that
	// hold the output of another run of the pipeline, on purpose
	// (stream.Options.TakeOverSinks; exactly run --take-over-sinks).
	TakeOverSinks bool
	// SkipCorruptCheckpoints falls back past completed checkpoints that do
	// not verify, accepting duplicates of the output committed after the one
	// restored (stream.Options.SkipCorruptCheckpoints; exactly run
	// --skip-corrupt-checkpoints).
	SkipCorruptCheckpoints bool
	// Cluster runs this process as one instance of the pipeline on a
	// cluster (cluster.RunJob; exactly run --cluster): the pipeline is cut
	// into stages at each key_by, and the instances that run the same file
	// share its tasks through the consumer group "exactly-" + its name.
	// Every input must be a kafka source; keep checkpoint.storage on
	// object storage (s3://) when the instances run on several machines.
	// Control serves the instance's control API and web page: its tasks
	// and the group's assignment (no /metrics yet). Run returns nil when
	// ctx ends, once this instance's tasks stopped cleanly.
	Cluster bool
}

// optionNames spell, in the engine's messages, the choices they offer as
// a user of the exactly binary makes them: each flag of exactly run is
// the RunOptions field of the same name for a Go program that runs a
// pipeline.
var optionNames = runtime.OptionNames{
	RunFinished:            "--run-finished",
	TakeOverSinks:          "--take-over-sinks",
	RestartMaxAttempts:     "restart.max_attempts in the pipeline file",
	SkipCorruptCheckpoints: "--skip-corrupt-checkpoints",
	RestoreFrom:            "--from",
	ControlAddr:            "--control-addr",
	ControlToken:           "--token-file or --token-env",
}

// options returns the engine's options of a run of the pipeline.
func (p *Pipeline) options(o RunOptions) stream.Options {
	c := p.plan.cfg
	return runtime.WithOptionNames(stream.Options{
		CheckpointDir:          c.Checkpoint.Storage,
		CheckpointInterval:     c.Checkpoint.Interval,
		CheckpointTimeout:      c.Checkpoint.Timeout,
		RetainedCheckpoints:    c.Checkpoint.Retained,
		DebloatTarget:          c.Checkpoint.DebloatTarget,
		StorageRequestTimeout:  c.Checkpoint.RequestTimeout,
		StorageMinTransferRate: c.Checkpoint.MinTransferRate,
		Parallelism:            c.Parallelism,
		Restart:                stream.RestartStrategy{MaxAttempts: c.Restart.MaxAttempts, InitialBackoff: c.Restart.InitialBackoff, MaxBackoff: c.Restart.MaxBackoff},
		Logger:                 o.Logger,
		Probe:                  o.Probe,
		RestoreFrom:            o.RestoreFrom,
		Control:                o.Control,
		RunFinished:            o.RunFinished,
		TakeOverSinks:          o.TakeOverSinks,
		SkipCorruptCheckpoints: o.SkipCorruptCheckpoints,
	}, optionNames)
}

// Run runs the pipeline until its source is finished and its output
// committed, or until ctx is cancelled (then it returns ctx.Err()). A
// pipeline restarted on the same checkpoint storage resumes from its last
// checkpoint.
func (p *Pipeline) Run(ctx context.Context, o RunOptions) error {
	j, err := p.plan.build()
	if err != nil {
		return err
	}
	if o.Cluster {
		conn, err := p.plan.clusterConn()
		if err != nil {
			return err
		}
		cl := p.plan.cfg.Cluster
		opts := p.options(o)
		opts.OwnershipLease = cl.OwnershipLease
		in, err := cluster.StartJob(ctx, j, cluster.Options{
			Group:                 kafka.GroupOptions{Conn: conn, Group: cl.Group, SessionTimeout: cl.SessionTimeout, Protocol: kafka.GroupProtocol(cl.GroupProtocol)},
			Job:                   opts,
			RepartitionPartitions: int32(cl.RepartitionPartitions),
			StagePause:            cl.StagePause,
		})
		if err != nil {
			return err
		}
		if o.Started != nil {
			o.Started(in.ControlAddr())
		}
		return in.Wait()
	}
	r, err := j.Start(ctx, p.options(o))
	if err == nil {
		if o.Started != nil {
			o.Started(r.ControlAddr())
		}
		err = r.Wait()
		p.stopped.Store(err == nil && r.Stopped())
	}
	// The engine's errors name the job, whose name is the pipeline's:
	// wrapped, the message said both ("pipeline "x": exactly: job "x" ...").
	return err
}

// Stopped reports whether the last [Pipeline.Run] that returned nil ended
// because the job was asked to stop (the control API's stop or
// savepoint-and-stop), not because its input was done: then it committed
// the output of its last checkpoint, and a run on the same checkpoint
// storage resumes from there.
func (p *Pipeline) Stopped() bool { return p.stopped.Load() }
