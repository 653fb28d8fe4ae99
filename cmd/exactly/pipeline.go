package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	controlapi "github.com/exactlyonce/exactly/control"
	"github.com/exactlyonce/exactly/internal/crashtest"
	"github.com/exactlyonce/exactly/metrics"
	"github.com/exactlyonce/exactly/pipeline"
	"github.com/exactlyonce/exactly/stream"
)

const runUsage = `Usage: exactly run PIPELINE.yaml [flags]

Runs the pipeline the YAML file describes (docs/pipelines.md is the
reference of the format) until its source is finished and its output
committed, or until interrupted (Ctrl-C, SIGTERM). Run again on the same
checkpoint storage, it resumes from its last checkpoint. ${VAR} in the file
is replaced by the environment variable VAR.

Flags:
`

const validateUsage = `Usage: exactly validate PIPELINE.yaml [flags]

Checks the pipeline file without running it: its YAML, every field, and
every expression, compiled and type-checked against the records it sees.
Each problem is printed as file:line:col with the fix; nothing connects to
a broker or a database. Prints a summary of the pipeline when it is valid.

Flags:
`

// pipelineArgs splits "FILE [flags]" and parses the flags of fs.
func pipelineArgs(fs *flag.FlagSet, usage string, args []string, out io.Writer) (string, error) {
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		if err := parseFlags(fs, usage, args, out); err != nil {
			return "", err
		}
		return "", fmt.Errorf("%s: the pipeline file is missing: exactly %s pipeline.yaml", fs.Name(), fs.Name())
	}
	return args[0], parseFlags(fs, usage, args[1:], out)
}

// runValidate checks a pipeline file.
func runValidate(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("validate", flag.ContinueOnError)
	path, err := pipelineArgs(fs, validateUsage, args, out)
	if err != nil {
		return err
	}
	p, err := pipeline.Load(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s: valid\n%s", path, p.Describe())
	return nil
}

// defaultControlAddr is where exactly run serves the control API unless
// told otherwise, and where the control commands look for it.
const defaultControlAddr = "127.0.0.1:8081"

// controlPorts is how many ports from defaultControlAddr's on exactly run
// tries when --control-addr is not given, so that a second job on the
// machine runs without a flag.
const controlPorts = 20

// firstFreeControlAddr returns the first loopback address from
// defaultControlAddr's port on that accepts a listener now, or
// defaultControlAddr when none does (the start then fails naming
// --control-addr).
func firstFreeControlAddr() string {
	host, port, _ := net.SplitHostPort(defaultControlAddr)
	first, _ := strconv.Atoi(port)
	for p := first; p < first+controlPorts; p++ {
		addr := net.JoinHostPort(host, strconv.Itoa(p))
		ln, err := net.Listen("tcp", addr)
		if err == nil {
			ln.Close()
			return addr
		}
	}
	return defaultControlAddr
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// logLevels are the values of --log-level.
var logLevels = map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError}

// runPipeline runs a pipeline file.
func runPipeline(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	level := fs.String("log-level", "info", "the least level of the logs written to stderr: debug, info, warn or error")
	format := fs.String("log-format", "text", "the logs' format: text or json")
	from := fs.String("from", "", "a savepoint or checkpoint directory (or URL) to start from when the pipeline's checkpoint storage holds none of its own")
	control := fs.String("control-addr", defaultControlAddr, `the address of the job's control API and web page (exactly status, savepoint, stop); "" serves none; by default the first free port from 8081 on the loopback address`)
	tokenFile := fs.String("token-file", "", "a file holding the bearer token that savepoint and stop need through the control API (default on a loopback address: a token of the job's own, written for its user only under the user's configuration directory)")
	tokenEnv := fs.String("token-env", "", "the name of an environment variable holding that token, instead of --token-file")
	runFinished := fs.Bool("run-finished", false, "run a pipeline whose last checkpoint is the final one of its input on from there, for new input (without it such a run commits and ends)")
	takeOver := fs.Bool("take-over-sinks", false, "let a run without a checkpoint write into sinks that hold another run's output, on purpose (a rerun from scratch)")
	skipCorrupt := fs.Bool("skip-corrupt-checkpoints", false, "fall back past completed checkpoints that do not verify to the newest that does, accepting duplicates of the output committed after it")
	onCluster := fs.Bool("cluster", false, "run this process as one instance of the pipeline on a cluster: start the same file on each machine; the pipeline is cut into stages at each key_by and the instances share its tasks (kafka inputs only; keep checkpoint.storage on s3://; the control API shows the instance's tasks and the group's assignment, without /metrics; see docs/scale-out.md)")
	path, err := pipelineArgs(fs, runUsage, args, out)
	if err != nil {
		return err
	}
	lv, ok := logLevels[*level]
	if !ok {
		return fmt.Errorf("run: --log-level is %q: use debug, info, warn or error, such as --log-level warn", *level)
	}
	var h slog.Handler
	switch *format {
	case "text":
		h = slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lv})
	case "json":
		h = slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: lv})
	default:
		return fmt.Errorf("run: --log-format is %q: use text or json, such as --log-format json", *format)
	}
	p, err := pipeline.Load(path)
	if err != nil {
		return err
	}
	if !flagSet(fs, "control-addr") {
		*control = firstFreeControlAddr()
	}
	localToken := ""
	if *control != "" && *tokenFile == "" && *tokenEnv == "" && controlapi.LoopbackAddr(*control) {
		// Without a local token the job runs as before: readable, and
		// changed by nobody through the API.
		if localToken, err = ensureLocalToken(p.Name()); err != nil {
			fmt.Fprintf(out, "no local control token (%v): savepoint and stop through the control API are refused; give --token-file to allow them\n", err)
			localToken = ""
		}
		*tokenFile = localToken
	}
	fmt.Fprint(out, p.Describe())
	// crashtest.Probe is nil except in a child of a crash test, which
	// kills the process at a point of the checkpoint protocol.
	ro := pipeline.RunOptions{Logger: slog.New(h), Probe: crashtest.Probe(), RestoreFrom: *from,
		RunFinished: *runFinished, TakeOverSinks: *takeOver, SkipCorruptCheckpoints: *skipCorrupt, Cluster: *onCluster,
		Started: func(addr string) {
			if addr != "" {
				fmt.Fprintf(out, "control API and web page: http://%s/ (exactly status --addr %s)\n", addr, addr)
			}
			if addr != "" && localToken != "" {
				fmt.Fprintf(out, "savepoint and stop: exactly savepoint --addr %s, exactly stop --addr %s (they read the job's token from %s, which only you can read)\n", addr, addr, localToken)
			}
		}}
	if *control != "" {
		ro.Control = stream.ControlOptions{Addr: *control, TokenFile: *tokenFile, TokenEnv: *tokenEnv, Metrics: metrics.Handler}
	}
	if *onCluster {
		if err := p.Run(ctx, ro); err != nil {
			return err
		}
		fmt.Fprintf(out, "pipeline %q: this instance stopped, its tasks' output committed; the other instances take its tasks over\n", p.Name())
		return nil
	}
	if err := p.Run(ctx, ro); err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return fmt.Errorf("run: pipeline %q interrupted: run it again to resume from its last checkpoint", p.Name())
		}
		return err
	}
	if p.Stopped() {
		fmt.Fprintf(out, "pipeline %q: stopped, the output of its last checkpoint committed: run it again to resume from there\n", p.Name())
		return nil
	}
	fmt.Fprintf(out, "pipeline %q: finished, output committed\n", p.Name())
	return nil
}
