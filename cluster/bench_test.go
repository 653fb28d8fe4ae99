package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/cluster"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/stream"
)

// BenchmarkRepartitionCost runs stagesJob (a running count per key, then
// per group: two key shuffles) over the same input in one process
// (stream.Job.Run: the shuffles are channels), and with cluster.RunJob on
// one and on three instances in this process (the shuffles are
// repartition topics, written transactionally and read read_committed).
// It reports events per second of wall time and per CPU-second of the
// whole process (user + system, getrusage), which includes the reader
// that counts the output and the Kafka clients, but not the broker.
//
//	go test -run '^$' -bench RepartitionCost -benchtime 1x ./cluster
func BenchmarkRepartitionCost(b *testing.B) {
	brokers := testenv.Kafka(b)
	const events, keys = 500_000, 1000
	for _, mode := range []string{"one-process", "1-instance", "3-instances"} {
		b.Run(mode, func(b *testing.B) {
			for range b.N {
				wall, cpu := runRepartitionCost(b, brokers, mode, events, keys)
				b.ReportMetric(events/wall.Seconds(), "events/s")
				b.ReportMetric(events/cpu.Seconds(), "events/CPU-s")
			}
		})
	}
}

// runRepartitionCost produces events records over keys keys, runs
// stagesJob on them in mode until its whole output is committed, and
// returns the wall and CPU time from the start of the job.
func runRepartitionCost(b *testing.B, brokers, mode string, events, keys int) (wall, cpu time.Duration) {
	adm := kafkatest.Admin(b, brokers)
	name := kafkatest.UniqueName("cost")
	in, out := name+"-in", name+"-out"
	kafkatest.CreateTopic(b, adm, in, 4)
	kafkatest.CreateTopic(b, adm, out, 4)
	b.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), in, out) })
	kafkatest.DeleteRepartitionTopicsAtEnd(b, adm, name)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(in))
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range events {
		cl.Produce(ctx, &kgo.Record{Key: fmt.Appendf(nil, "k%04d", i%keys), Value: fmt.Append(nil, i)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	cl.Close()
	reader, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(out), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		b.Fatal(err)
	}
	defer reader.Close()

	dir := b.TempDir()
	opts := stream.Options{CheckpointDir: filepath.Join(dir, "ckpt"), CheckpointInterval: time.Second}
	start, startCPU := time.Now(), processCPU()
	instances := map[string]int{"1-instance": 1, "3-instances": 3}[mode]
	done := make(chan error, max(instances, 1))
	for i := range max(instances, 1) {
		conn := kafka.Conn{Brokers: []string{brokers}, ClientID: fmt.Sprintf("%s-%d", name, i)}
		j, err := stagesJob(name, conn, in, out)
		if err != nil {
			b.Fatal(err)
		}
		go func() {
			if instances == 0 {
				done <- j.Run(ctx, opts)
				return
			}
			done <- cluster.RunJob(ctx, j, cluster.Options{Group: kafka.GroupOptions{Conn: conn}, Job: opts})
		}()
	}
	for seen := 0; seen < events; {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Minute)
		fs := reader.PollFetches(pctx)
		timedOut := pctx.Err() != nil
		pcancel()
		if timedOut {
			b.Fatalf("%s: %d of %d records of the output after waiting 2 minutes", mode, seen, events)
		}
		seen += fs.NumRecords()
	}
	wall, cpu = time.Since(start), processCPU()-startCPU
	cancel()
	for range max(instances, 1) {
		<-done
	}
	b.Logf("%s: %d events in %v, %v CPU", mode, events, wall.Round(time.Millisecond), cpu.Round(time.Millisecond))
	return wall, cpu
}

// processCPU returns the user and system CPU time of this process so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
