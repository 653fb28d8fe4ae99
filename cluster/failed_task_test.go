package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/cluster"
	"github.com/exactlyonce/exactly/cluster/clustermetrics"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/stream"
)

// TestFailedTaskIsParked runs one instance of a job whose task of input
// partition 0 fails on every record (a poison task: a corrupt checkpoint
// or a bug fails it the same way on every instance) beside the task of
// partition 1 (issue 27, case 5). The failed task is parked: the instance
// goes on, partition 1's output flows, and Run ends without an error when
// the instance is stopped. Before, the failure stopped the instance's
// healthy tasks and failed Run, and the group handed the poison task to
// the next instance, which failed the same way. The parked task is
// reported in the instance's status (Instance.ParkedTasks) and its metrics
// (clustermetrics.Collector), not only in the log.
func TestFailedTaskIsParked(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	input, out, group := kafkatest.UniqueName("parked-in"), kafkatest.UniqueName("parked-out"), kafkatest.UniqueName("parked-group")
	kafkatest.CreateTopic(t, adm, input, 2)
	kafkatest.CreateTopic(t, adm, out, 1)
	t.Cleanup(func() { _, _ = adm.DeleteGroup(context.Background(), group) })
	const perPartition = 20
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(input), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range perPartition {
		for p := range int32(2) {
			r := &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "p%d:%d", p, i)}
			if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cl.Close()

	conn := kafka.Conn{Brokers: []string{brokers}}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	in, err := cluster.Start(ctx, "parked", cluster.Options{
		Group: kafka.GroupOptions{Conn: conn, Group: group, Topics: []string{input}, SessionTimeout: 6 * time.Second},
		Job: stream.Options{
			CheckpointDir: t.TempDir(), CheckpointInterval: 100 * time.Millisecond,
			Restart: stream.RestartStrategy{MaxAttempts: -1},
		},
	}, func(name string, task cluster.Task) (*stream.Job, error) {
		src, err := kafka.NewSource(task.SourceOptions(kafka.SourceOptions{Conn: conn}), kafka.String())
		if err != nil {
			return nil, err
		}
		snk, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: out, TransactionTimeout: time.Minute},
			func(v string) (kafka.Message, error) { return kafka.Message{Value: []byte(v)}, nil })
		if err != nil {
			return nil, err
		}
		j := stream.New(name)
		values := stream.Map(stream.Source(j, "in", src), func(r kafka.Record[string]) string { return r.Value })
		if task.Partition == 0 {
			values = stream.FlatMap(values, func(v string, out []string) []string {
				panic("poison: every record of partition 0 fails")
			})
		}
		stream.SinkTo(values, "out", snk)
		return j, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- in.Wait() }()
	got := kafkatest.ReadCommitted(t, brokers, out, perPartition, 2*time.Minute)
	select {
	case err := <-ran:
		t.Fatalf("Run returned %v while partition 1 flowed: the failed task took the instance down", err)
	default:
	}
	kafkatest.WaitFor(t, time.Minute, "the poison task to be parked", func() bool { return in.TasksParked() > 0 })
	parked := in.ParkedTasks()
	if len(parked) != 1 || parked[0].Task != (cluster.Task{Topic: input, Partition: 0}) ||
		parked[0].Err == nil || !strings.Contains(parked[0].Err.Error(), "poison") || parked[0].Since.IsZero() {
		t.Errorf("ParkedTasks() = %+v, want task %s/0 with its failure (the poison panic) and when it was parked", parked, input)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(clustermetrics.NewCollector("parked", in))
	want := fmt.Sprintf(`
# HELP exactly_cluster_parked_tasks Tasks that failed and are parked on this instance now.
# TYPE exactly_cluster_parked_tasks gauge
exactly_cluster_parked_tasks{job_name="parked"} 1
# HELP exactly_cluster_task_parked 1 for each task (input partition) that failed and is parked on this instance: its partition kept but not processed until a rebalance takes it away.
# TYPE exactly_cluster_task_parked gauge
exactly_cluster_task_parked{job_name="parked",partition="0",topic=%q} 1
# HELP exactly_cluster_tasks_parked_total Tasks parked on this instance since it started, including those a rebalance has taken away since.
# TYPE exactly_cluster_tasks_parked_total counter
exactly_cluster_tasks_parked_total{job_name="parked"} 1
`, input)
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Errorf("the instance's metrics do not report the parked task: %v", err)
	}
	for _, r := range got {
		if string(r.Value[:2]) != "p1" {
			t.Errorf("output %q: only partition 1's task runs", r.Value)
		}
	}
	stop()
	if err := <-ran; err != nil {
		t.Errorf("Run after the stop = %v, want nil: the failure is reported, the instance stopped cleanly", err)
	}
}

// TestCorruptTaskCheckpointIsParked corrupts the newest checkpoint of one
// task of a cluster job while the instance is down (issue 27, case 5, as
// the issue puts it): on the next start that task cannot restore, fails
// and is parked with an error naming the corruption, while the other
// task restores its own checkpoint and its new records flow.
func TestCorruptTaskCheckpointIsParked(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	input, out, group := kafkatest.UniqueName("corrupt-in"), kafkatest.UniqueName("corrupt-out"), kafkatest.UniqueName("corrupt-group")
	kafkatest.CreateTopic(t, adm, input, 2)
	kafkatest.CreateTopic(t, adm, out, 1)
	t.Cleanup(func() { _, _ = adm.DeleteGroup(context.Background(), group) })
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(input), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	produce := func(round int) {
		for i := range 10 {
			for p := range int32(2) {
				r := &kgo.Record{Partition: p, Value: fmt.Appendf(nil, "p%d:%d:%d", p, round, i)}
				if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	conn := kafka.Conn{Brokers: []string{brokers}}
	checkpoints := t.TempDir()
	run := func(ctx context.Context) *cluster.Instance {
		in, err := cluster.Start(ctx, "corrupt", cluster.Options{
			Group: kafka.GroupOptions{Conn: conn, Group: group, Topics: []string{input}, SessionTimeout: 6 * time.Second},
			Job: stream.Options{
				CheckpointDir: checkpoints, CheckpointInterval: 100 * time.Millisecond,
				Restart: stream.RestartStrategy{MaxAttempts: -1},
			},
		}, func(name string, task cluster.Task) (*stream.Job, error) {
			src, err := kafka.NewSource(task.SourceOptions(kafka.SourceOptions{Conn: conn}), kafka.String())
			if err != nil {
				return nil, err
			}
			snk, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: out, TransactionTimeout: time.Minute},
				func(v string) (kafka.Message, error) { return kafka.Message{Value: []byte(v)}, nil })
			if err != nil {
				return nil, err
			}
			j := stream.New(name)
			stream.SinkTo(stream.Map(stream.Source(j, "in", src), func(r kafka.Record[string]) string { return r.Value }), "out", snk)
			return j, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return in
	}

	produce(0)
	ctx, stop := context.WithCancel(context.Background())
	first := run(ctx)
	kafkatest.ReadCommitted(t, brokers, out, 20, 2*time.Minute)
	stop()
	if err := first.Wait(); err != nil {
		t.Fatal(err)
	}
	corrupted := corruptNewestCheckpoint(t, filepath.Join(checkpoints, input+".0"))
	t.Logf("corrupted %s", corrupted)

	produce(1)
	ctx, stop = context.WithCancel(context.Background())
	defer stop()
	second := run(ctx)
	got := kafkatest.ReadCommitted(t, brokers, out, 30, 2*time.Minute)
	kafkatest.WaitFor(t, time.Minute, "the task of the corrupt checkpoint to be parked", func() bool { return second.TasksParked() > 0 })
	parked := second.ParkedTasks()
	if len(parked) != 1 || parked[0].Task != (cluster.Task{Topic: input, Partition: 0}) || parked[0].Err == nil || !strings.Contains(parked[0].Err.Error(), "corrupt") {
		t.Errorf("ParkedTasks() = %+v, want task %s/0 parked with an error naming the corrupt checkpoint", parked, input)
	}
	var round1 int
	for _, r := range got {
		v := string(r.Value)
		switch {
		case strings.HasPrefix(v, "p1:1:"):
			round1++
		case strings.HasPrefix(v, "p0:1:"):
			t.Errorf("output %q of the task whose checkpoint is corrupt", v)
		}
	}
	if round1 != 10 || len(got) != 30 {
		t.Errorf("%d records committed, %d of them partition 1's new ones: want 30 and 10 (the healthy task restored and went on)", len(got), round1)
	}
	stop()
	if err := second.Wait(); err != nil {
		t.Errorf("the instance after the stop: %v, want nil", err)
	}
}

// corruptNewestCheckpoint flips a byte in the middle of the largest file
// of the newest completed checkpoint under dir, and returns its path.
func corruptNewestCheckpoint(t *testing.T, dir string) string {
	t.Helper()
	chks, err := filepath.Glob(filepath.Join(dir, "chk-*"))
	if err != nil || len(chks) == 0 {
		t.Fatalf("no checkpoint under %s: %v", dir, err)
	}
	newest, newestID := "", -1
	for _, c := range chks {
		id, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(c), "chk-"))
		if err == nil && id > newestID {
			if _, err := os.Stat(filepath.Join(c, "_metadata")); err == nil {
				newest, newestID = c, id
			}
		}
	}
	if newest == "" {
		t.Fatalf("no completed checkpoint under %s", dir)
	}
	files, err := os.ReadDir(newest)
	if err != nil {
		t.Fatal(err)
	}
	var largest string
	var size int64
	for _, f := range files {
		if fi, err := f.Info(); err == nil && !f.IsDir() && fi.Size() > size {
			largest, size = filepath.Join(newest, f.Name()), fi.Size()
		}
	}
	data, err := os.ReadFile(largest)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0xff
	if err := os.WriteFile(largest, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return largest
}
