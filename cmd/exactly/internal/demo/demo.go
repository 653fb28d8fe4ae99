// Package demo is the job behind `exactly demo` and the engine's crash test:
// generated orders → per-customer running totals in keyed state → an
// exactly-once SQLite table and exactly-once files. It also verifies the
// committed output against the totals computed directly from the generator.
package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strconv"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/connectors/sqlite"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// Config configures the demo job.
type Config struct {
	// Dir holds the checkpoints, the SQLite database and the output files.
	Dir string
	// Events is the number of orders generated.
	Events uint64
	// Customers is the number of distinct customers.
	Customers int
	// Seed makes the orders reproducible.
	Seed uint64
	// Rate limits orders per second; 0 means as fast as possible.
	Rate float64
	// Parallelism of the source, the running totals and the sinks.
	Parallelism int
	// CheckpointInterval is the time between checkpoints.
	CheckpointInterval time.Duration
	// Probe is passed to the engine (fault injection); may be nil.
	Probe func(stream.ProbePoint, checkpoint.ID)
	// Logger receives the engine's logs; nil means slog.Default().
	Logger *slog.Logger
	// Discard replaces the SQLite and file sinks by one that commits
	// nothing, to measure the engine alone.
	Discard bool
	// State is the keyed-state backend: "heap" (the default when empty)
	// or "pebble" (on disk, under Dir/state).
	State string
	// OnStart, when set, is called with the job's metrics once it started.
	OnStart func(*stream.Metrics)
}

// Validate reports the first invalid field, naming the flag that sets it.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("demo: --dir is empty: give a directory for checkpoints and output")
	case c.Events == 0:
		return errors.New("demo: --events is 0: generate at least one order")
	case c.Customers <= 0:
		return fmt.Errorf("demo: --customers is %d: use at least 1", c.Customers)
	case c.State != "" && c.State != "heap" && c.State != "pebble":
		return fmt.Errorf("demo: --state is %q: use heap or pebble", c.State)
	case c.Parallelism <= 0 || c.Parallelism > state.DefaultMaxParallelism:
		return fmt.Errorf("demo: --parallelism is %d: use a value in [1, %d]", c.Parallelism, state.DefaultMaxParallelism)
	case c.CheckpointInterval <= 0:
		return fmt.Errorf("demo: --interval is %v: use a positive duration such as 500ms", c.CheckpointInterval)
	case c.Rate < 0:
		return fmt.Errorf("demo: --rate is %v: use 0 (unlimited) or a positive number of orders per second", c.Rate)
	}
	return nil
}

// Order is one generated event.
type Order struct {
	ID       uint64
	Customer string
	Amount   int64 // cents
}

// Total is one output row: an order and its customer's running total
// including it.
type Total struct {
	OrderID  uint64
	Customer string
	Amount   int64
	Running  int64
}

// OrderAt returns order i of the demo's deterministic input.
func OrderAt(seed uint64, customers int, i uint64) Order {
	r := generator.Rand(seed, i)
	return Order{
		ID:       i,
		Customer: "c" + strconv.Itoa(r.IntN(customers)),
		Amount:   1 + r.Int64N(10_000),
	}
}

// Paths of the demo's outputs inside Config.Dir.
func checkpointDir(dir string) string { return filepath.Join(dir, "checkpoints") }
func databasePath(dir string) string  { return filepath.Join(dir, "totals.db") }
func filesDir(dir string) string      { return filepath.Join(dir, "files") }

const table = "totals"

// Build returns the demo job and its run options.
func Build(c Config) (*stream.Job, stream.Options, error) {
	if err := c.Validate(); err != nil {
		return nil, stream.Options{}, err
	}
	src, err := generator.New(generator.Options{Count: c.Events, Splits: 8, Rate: c.Rate}, func(i uint64) Order {
		return OrderAt(c.Seed, c.Customers, i)
	})
	if err != nil {
		return nil, stream.Options{}, err
	}
	j := stream.New("demo")
	if c.State == "pebble" {
		j.SetStateBackend(state.BackendConfig{Kind: state.PebbleBackend, Dir: filepath.Join(c.Dir, "state")})
	}
	orders := stream.Source(j, "orders", src, stream.Parallelism(c.Parallelism))
	byCustomer := stream.KeyBy(orders, func(o Order) string { return o.Customer }, state.StringCodec{})
	totals := stream.Process(byCustomer, "running-totals", runningTotals, stream.Parallelism(c.Parallelism))
	if c.Discard {
		stream.SinkTo[Total](totals, "discard", discard{})
	} else if err := addSinks(c, totals); err != nil {
		return nil, stream.Options{}, err
	}
	opts := stream.Options{
		CheckpointDir:      checkpointDir(c.Dir),
		CheckpointInterval: c.CheckpointInterval,
		Logger:             c.Logger,
		Probe:              c.Probe,
		Restart:            stream.RestartStrategy{InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second},
	}
	return j, opts, nil
}

// addSinks writes the totals to the SQLite table and to the CSV files.
func addSinks(c Config, totals stream.Stream[Total]) error {
	db, err := sqlite.NewSink(sqlite.Options{
		Path:  databasePath(c.Dir),
		Table: table,
		Columns: []sqlite.Column{
			{Name: "order_id", Type: "INTEGER"}, {Name: "customer", Type: "TEXT"},
			{Name: "amount", Type: "INTEGER"}, {Name: "running", Type: "INTEGER"},
		},
	}, func(t Total, row []any) []any {
		return append(row, int64(t.OrderID), t.Customer, t.Amount, t.Running)
	})
	if err != nil {
		return err
	}
	files, err := file.NewSink(filesDir(c.Dir), appendTotal, file.SinkOptions{Prefix: "totals", Suffix: ".csv"})
	if err != nil {
		return err
	}
	stream.SinkTo(totals, "sqlite", db)
	stream.SinkTo(totals, "files", files)
	return nil
}

// runningTotals keeps each customer's total in keyed state.
func runningTotals(ctx *stream.Context[string]) (stream.ProcessFunc[string, Order, Total], error) {
	total, err := state.NewValueState(ctx.State(), "total", state.Int64Codec{})
	if err != nil {
		return stream.ProcessFunc[string, Order, Total]{}, err
	}
	return stream.ProcessFunc[string, Order, Total]{
		Process: func(ctx *stream.Context[string], o Order, out *stream.Output[Total]) error {
			t, _ := total.Value()
			t += o.Amount
			total.Update(t)
			out.Emit(Total{OrderID: o.ID, Customer: o.Customer, Amount: o.Amount, Running: t})
			return nil
		},
	}, nil
}

// appendTotal encodes a total as a CSV line: order_id,customer,amount,running.
func appendTotal(dst []byte, t Total) []byte {
	dst = strconv.AppendUint(dst, t.OrderID, 10)
	dst = append(dst, ',')
	dst = append(dst, t.Customer...)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, t.Amount, 10)
	dst = append(dst, ',')
	return strconv.AppendInt(dst, t.Running, 10)
}

// Run runs the demo job in this process until its input is done and all
// output is committed; progress, when set, is called once a second.
func Run(ctx context.Context, c Config, progress func(*stream.Metrics)) error {
	j, opts, err := Build(c)
	if err != nil {
		return err
	}
	r, err := j.Start(ctx, opts)
	if err != nil {
		return err
	}
	if c.OnStart != nil {
		c.OnStart(r.Metrics())
	}
	if progress == nil {
		return r.Wait()
	}
	done := make(chan error, 1)
	go func() { done <- r.Wait() }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			progress(r.Metrics())
			return err
		case <-tick.C:
			progress(r.Metrics())
		}
	}
}
