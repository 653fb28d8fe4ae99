// Command exactly-cluster is one instance of the cluster benchmark's job on
// exactly (bench/cmd/cluster-bench, issue 30): records "user:item" keyed by
// user, stamped with their event time, are re-keyed by item (one
// repartition topic, made by cluster.RunJob) and counted per item in
// tumbling event-time windows, each window's count written, once closed,
// to the output topic as "item:windowStartMillis:count", keyed by item, by
// the exactly-once Kafka sink. Every instance runs the same command; the
// consumer group spreads the tasks. SIGTERM stops it cleanly.
//
//	exactly-cluster --brokers 127.0.0.1:9092 --in in --out out --name bench --checkpoints /tmp/ckpt
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/exactlyonce/exactly/cluster"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

func main() {
	var o options
	flag.StringVar(&o.brokers, "brokers", "", "Kafka bootstrap address")
	flag.StringVar(&o.in, "in", "", "input topic")
	flag.StringVar(&o.out, "out", "", "output topic")
	flag.StringVar(&o.name, "name", "", "job name (the repartition topic and the group are named after it)")
	flag.StringVar(&o.checkpoints, "checkpoints", "", "base directory or s3:// URL of the tasks' checkpoints")
	flag.DurationVar(&o.interval, "interval", time.Second, "checkpoint interval")
	flag.DurationVar(&o.session, "session-timeout", 6*time.Second, "the group's session timeout")
	flag.DurationVar(&o.window, "window", time.Second, "tumbling window size")
	flag.StringVar(&o.protocol, "group-protocol", string(kafka.DefaultGroupProtocol), "the group's rebalance protocol: classic or consumer (KIP-848)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "exactly-cluster:", err)
		os.Exit(1)
	}
}

type options struct {
	brokers, in, out, name, checkpoints, protocol string
	interval, session, window                     time.Duration
}

// windowCount is one item's count in one window.
type windowCount struct {
	Item  string
	Start int64
	Count int64
}

func run(ctx context.Context, o options) error {
	if o.brokers == "" || o.in == "" || o.out == "" || o.name == "" || o.checkpoints == "" {
		return fmt.Errorf("--brokers, --in, --out, --name and --checkpoints are required")
	}
	conn := kafka.Conn{Brokers: []string{o.brokers}}
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{o.in}}, kafka.String())
	if err != nil {
		return err
	}
	snk, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: o.out, CheckpointInterval: o.interval},
		func(w windowCount) (kafka.Message, error) {
			return kafka.Message{Key: []byte(w.Item), Value: []byte(w.Item + ":" + strconv.FormatInt(w.Start, 10) + ":" + strconv.FormatInt(w.Count, 10))}, nil
		})
	if err != nil {
		return err
	}
	j := stream.New(o.name)
	recs := stream.SourceWithEventTime(j, "in", src, stream.EventTime[kafka.Record[string]]{
		Timestamp: func(r kafka.Record[string]) time.Time { return r.Timestamp },
		// The producer stamps records with the time it sends them, from
		// several goroutines: a little disorder per partition.
		MaxOutOfOrderness: 200 * time.Millisecond,
	})
	byItem := stream.KeyBy(recs, func(r kafka.Record[string]) string {
		_, item, _ := strings.Cut(r.Value, ":")
		return item
	}, state.StringCodec{})
	counts := stream.WindowAggregate(byItem, "per-item", stream.Tumbling(o.window), func(r kafka.Record[string]) time.Time { return r.Timestamp },
		stream.Aggregate[string, kafka.Record[string], int64, windowCount]{
			Add: func(n int64, _ kafka.Record[string]) int64 { return n + 1 },
			Result: func(item string, w stream.Window, n int64) windowCount {
				return windowCount{Item: item, Start: w.Start.UnixMilli(), Count: n}
			},
			Codec: state.Int64Codec{},
		})
	stream.SinkTo(counts, "out", snk)
	return cluster.RunJob(ctx, j, cluster.Options{
		Group: kafka.GroupOptions{Conn: conn, SessionTimeout: o.session, Protocol: kafka.GroupProtocol(o.protocol)},
		Job: stream.Options{CheckpointDir: o.checkpoints, CheckpointInterval: o.interval,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))},
	})
}
