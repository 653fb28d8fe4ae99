// Command exactly-nexmark runs one Nexmark query (see package
// bench/nexmark) on exactly: it reads the input topic, computes the query
// and writes the result to the output topic with the exactly-once Kafka
// sink, checkpointing every second at parallelism 2. It runs until it is
// signalled (SIGTERM or SIGINT stop it cleanly); started again with the
// same --checkpoints directory it resumes from the latest checkpoint.
//
//	exactly-nexmark --brokers 127.0.0.1:9092 --query q1 --in nexmark --out q1-out --checkpoints /tmp/ckpt
//
// Each output record keeps the timestamp of the input record it comes from,
// so visibility latency can be measured at the output.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/exactlyonce/exactly/bench/nexmark"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// config holds the command's flags.
type config struct {
	brokers, query, in, out, checkpoints, txnPrefix, cpuProfile string
	sideInput, logLevel                                         string
	parallelism, gcPercent                                      int
	memoryLimit                                                 int64
	interval, watermarkInterval                                 time.Duration
}

// main parses the flags and runs the job until it is signalled.
func main() {
	var c config
	flag.StringVar(&c.brokers, "brokers", os.Getenv("EXACTLY_KAFKA_BROKERS"), "Kafka bootstrap brokers, comma-separated")
	flag.StringVar(&c.query, "query", "q0", "query: "+strings.Join(nexmark.Queries, ", "))
	flag.StringVar(&c.in, "in", "nexmark", "input topic")
	flag.StringVar(&c.out, "out", "", "output topic (must exist)")
	flag.StringVar(&c.checkpoints, "checkpoints", "", "checkpoint directory")
	flag.StringVar(&c.txnPrefix, "txn-prefix", "", "transactional id prefix of the sink (default exactly-nexmark-<out>)")
	flag.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	flag.StringVar(&c.sideInput, "side-input", "", "q13: the side input file, lines key,value")
	flag.IntVar(&c.parallelism, "parallelism", 2, "parallelism of every operator")
	flag.DurationVar(&c.interval, "interval", time.Second, "checkpoint interval")
	flag.DurationVar(&c.watermarkInterval, "watermark-interval", 0, "how often the sources send watermarks (stream.Options.WatermarkInterval); 0: the engine's default, 200ms")
	flag.IntVar(&c.gcPercent, "gogc", 400, "the Go garbage collector's GOGC: heap growth before a collection, in percent; the JVM peers size their heaps too (see docs/benchmarks.md)")
	flag.Int64Var(&c.memoryLimit, "memory-limit", 768<<20, "the Go runtime's soft memory limit (GOMEMLIMIT), bytes: the heap GOGC lets grow is collected before it passes this, "+
		"as the JVM peers' -Xmx1g bounds theirs (their heap alone, without the JVM's own memory); 0: none")
	flag.StringVar(&c.logLevel, "log-level", cmp.Or(os.Getenv("EXACTLY_NEXMARK_LOG_LEVEL"), "warn"),
		"the least level of the engine's logs on stderr: debug (each sink transaction's prepare and commit, timed), info, warn or error; "+
			"default $EXACTLY_NEXMARK_LOG_LEVEL, which nexmark-bench's systems inherit, or warn")
	flag.Parse()
	debug.SetGCPercent(c.gcPercent)
	if c.memoryLimit > 0 {
		debug.SetMemoryLimit(c.memoryLimit)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "exactly-nexmark:", err)
		os.Exit(1)
	}
}

// run builds the job of c.query and runs it until SIGTERM or SIGINT.
func run(c config) error {
	if c.brokers == "" || c.out == "" || c.checkpoints == "" {
		return errors.New("--brokers, --out and --checkpoints are required")
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.logLevel)); err != nil {
		return fmt.Errorf("--log-level is %q: use debug, info, warn or error", c.logLevel)
	}
	if c.txnPrefix == "" {
		c.txnPrefix = "exactly-nexmark-" + c.out
	}
	conn := kafka.Conn{Brokers: strings.Split(c.brokers, ",")}
	snk, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: c.out, TransactionalIDPrefix: c.txnPrefix, CheckpointInterval: c.interval},
		func(r result) (kafka.Message, error) {
			return kafka.Message{Key: r.key, Value: r.value, Timestamp: r.time}, r.err
		})
	if err != nil {
		return err
	}
	j := stream.New("nexmark-" + c.query)
	in := kafka.SourceOptions{Conn: conn, Topics: []string{c.in}}
	var results stream.Stream[result]
	switch c.query {
	case "q5", "q7", "q11":
		results, err = windowed(j, c, in)
	case "q8":
		results, err = newUsers(j, c, in)
	case "q12":
		results, err = processingWindows(j, c, in)
	case "q3":
		results, err = localItems(j, c, in)
	case "q15", "q16", "q17", "q18", "q19":
		results, err = tables(j, c, in)
	case "q4", "q6", "q9", "q20":
		results, err = auctionBids(j, c, in)
	default:
		results, err = perRecord(j, c, in)
	}
	if err != nil {
		return err
	}
	stream.SinkTo(results, "out", snk)

	if c.cpuProfile != "" {
		f, err := os.Create(c.cpuProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err = j.Run(ctx, stream.Options{
		CheckpointDir:      c.checkpoints,
		CheckpointInterval: c.interval,
		WatermarkInterval:  c.watermarkInterval,
		Parallelism:        c.parallelism,
		Logger:             slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})),
	})
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// perRecord builds the queries that map each input record to at most one
// output: q0, q1, q2, count, q10, q13, q14, q21 and q22.
func perRecord(j *stream.Job, c config, in kafka.SourceOptions) (stream.Stream[result], error) {
	src, err := kafka.NewSource(in, kafka.Bytes())
	if err != nil {
		return stream.Stream[result]{}, err
	}
	events := stream.Source(j, "events", src, stream.Parallelism(c.parallelism))
	switch c.query {
	case "q0":
		return stream.Map(events, func(r kafka.Record[[]byte]) result { return result{value: r.Value, time: r.Timestamp} }), nil
	case "q1", "q2":
		return stream.FlatMap(events, selectBids(c.query)), nil
	case "q10", "q14", "q21", "q22":
		return stream.FlatMap(events, bidDetails(c.query)), nil
	case "q13":
		if c.sideInput == "" {
			return stream.Stream[result]{}, errors.New("q13 needs --side-input, the file of its side input")
		}
		file, err := os.ReadFile(c.sideInput)
		if err != nil {
			return stream.Stream[result]{}, err
		}
		side, err := nexmark.ParseSideInput(file)
		if err != nil {
			return stream.Stream[result]{}, err
		}
		return stream.FlatMap(events, sideInputJoin(side)), nil
	case "count":
		bids := stream.FlatMap(events, parseBids)
		byAuction := stream.KeyBy(bids, func(b bid) int64 { return b.Auction }, state.Int64Codec{})
		return stream.Process(byAuction, "bids-per-auction", countBids, stream.Parallelism(c.parallelism)), nil
	}
	return stream.Stream[result]{}, fmt.Errorf("unknown --query %q: use one of %v", c.query, nexmark.Queries)
}

// outCap is the capacity allocated for one output value: enough for every
// query's output, so that appending to it never reallocates.
const outCap = 64

// result is one output record: its value (and key, for the updating
// queries) and the timestamp of the input record it was computed from. A malformed input makes a result whose err
// stops the job at the sink.
type result struct {
	key   []byte // the updating queries: the row's key
	value []byte
	time  time.Time
	err   error
}

// bid is a parsed bid with its input timestamp, or the parse error.
type bid struct {
	nexmark.Bid
	time time.Time
	err  error
}

// parseBids keeps the bids of the input, parsed.
func parseBids(r kafka.Record[[]byte], out []bid) []bid {
	b, ok, err := nexmark.ParseBid(r.Value)
	if ok || err != nil {
		out = append(out, bid{Bid: b, time: r.Timestamp, err: err})
	}
	return out
}

// selectBids returns the function computing q1 or q2 from one input record.
func selectBids(query string) func(kafka.Record[[]byte], []result) []result {
	return func(r kafka.Record[[]byte], out []result) []result {
		b, ok, err := nexmark.ParseBid(r.Value)
		switch {
		case err != nil:
			return append(out, result{err: err})
		case !ok:
			return out
		case query == "q1":
			return append(out, result{value: nexmark.AppendQ1(make([]byte, 0, outCap), b), time: r.Timestamp})
		case nexmark.Q2Selects(b):
			return append(out, result{value: nexmark.AppendQ2(make([]byte, 0, outCap), b), time: r.Timestamp})
		}
		return out
	}
}

// bidDetails returns the function computing q10, q14, q21 or q22 from
// one input record: the last three read the bid's channel and url too.
func bidDetails(query string) func(kafka.Record[[]byte], []result) []result {
	return func(r kafka.Record[[]byte], out []result) []result {
		b, ok, err := nexmark.ParseBidDetail(r.Value)
		switch {
		case err != nil:
			return append(out, result{err: err})
		case !ok:
			return out
		case query == "q10":
			out = append(out, result{value: nexmark.AppendQ10(make([]byte, 0, outCap), b.Bid), time: r.Timestamp})
		case query == "q14":
			if nexmark.Q14Selects(b.Bid) {
				out = append(out, result{value: nexmark.AppendQ14(make([]byte, 0, outCap), b), time: r.Timestamp})
			}
		case query == "q21":
			if id, ok := nexmark.Q21ChannelID(b); ok {
				out = append(out, result{value: nexmark.AppendQ21(make([]byte, 0, outCap), b, id), time: r.Timestamp})
			}
		default:
			out = append(out, result{value: nexmark.AppendQ22(make([]byte, 0, outCap), b), time: r.Timestamp})
		}
		return out
	}
}

// sideInputJoin returns the function computing q13 from one input record:
// the bid with the value of its auction's key in the side input, which
// the job loaded whole at its start; a key the side input lacks stops the
// job.
func sideInputJoin(side map[int64][]byte) func(kafka.Record[[]byte], []result) []result {
	return func(r kafka.Record[[]byte], out []result) []result {
		b, ok, err := nexmark.ParseBid(r.Value)
		switch {
		case err != nil:
			return append(out, result{err: err})
		case !ok:
			return out
		}
		v, ok := side[b.Auction%nexmark.SideInputKeys]
		if !ok {
			return append(out, result{err: fmt.Errorf("q13: no side input value of key %d", b.Auction%nexmark.SideInputKeys)})
		}
		return append(out, result{value: nexmark.AppendQ13(make([]byte, 0, outCap), b, v), time: r.Timestamp})
	}
}

// countBids keeps the number of bids per auction in keyed state and emits
// the running count with every bid.
func countBids(ctx *stream.Context[int64]) (stream.ProcessFunc[int64, bid, result], error) {
	count, err := state.NewValueState(ctx.State(), "bids", state.Int64Codec{})
	if err != nil {
		return stream.ProcessFunc[int64, bid, result]{}, err
	}
	return stream.ProcessFunc[int64, bid, result]{
		Process: func(ctx *stream.Context[int64], b bid, out *stream.Output[result]) error {
			if b.err != nil {
				return b.err
			}
			n, _ := count.Value()
			n++
			count.Update(n)
			out.Emit(result{value: nexmark.AppendCount(make([]byte, 0, outCap), b.Auction, n), time: b.time})
			return nil
		},
	}, nil
}
