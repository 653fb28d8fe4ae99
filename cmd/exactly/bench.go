package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/exactlyonce/exactly/cmd/exactly/internal/demo"
)

const benchUsage = `Usage: exactly bench [flags]

Measures the throughput of the demo job's topology (generator → keyed
running totals → sinks) in this process, once with a sink that discards its
input (the engine alone) and once with the exactly-once SQLite and file
sinks, and prints events per second. docs/benchmarks.md records results.

Flags:
`

func runBench(ctx context.Context, args []string, out io.Writer) error {
	var c demo.Config
	var runs int
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.Uint64Var(&c.Events, "events", 2_000_000, "orders per run")
	fs.IntVar(&c.Customers, "customers", 10_000, "distinct customers (keys)")
	fs.IntVar(&c.Parallelism, "parallelism", 2, "parallel subtasks of each operator")
	fs.DurationVar(&c.CheckpointInterval, "interval", time.Second, "checkpoint interval")
	fs.IntVar(&runs, "runs", 3, "runs per configuration")
	fs.StringVar(&c.State, "state", "heap", "keyed-state backend: heap or pebble")
	if err := parseFlags(fs, benchUsage, args, out); err != nil {
		return err
	}
	c.Seed = 1
	c.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	tmp, err := os.MkdirTemp("", "exactly-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	fmt.Fprintf(out, "exactly bench: %d orders, %d keys, parallelism %d, checkpoints every %v, %s state, %d runs each\n",
		c.Events, c.Customers, c.Parallelism, c.CheckpointInterval, c.State, runs)
	for _, discard := range []bool{true, false} {
		name := "sqlite+files sinks (exactly-once)"
		if discard {
			name = "discarding sink (engine only)"
		}
		c.Discard = discard
		for i := range runs {
			c.Dir = filepath.Join(tmp, fmt.Sprintf("%t-%d", discard, i))
			start := time.Now()
			if err := demo.Run(ctx, c, nil); err != nil {
				return err
			}
			d := time.Since(start)
			fmt.Fprintf(out, "  %-36s run %d: %8.0f events/s (%v)\n", name, i+1, float64(c.Events)/d.Seconds(), d.Round(time.Millisecond))
		}
	}
	return nil
}
