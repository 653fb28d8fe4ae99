package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/cluster"
	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/connectors/sqlite"
	"github.com/exactlyonce/exactly/control"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// keyCount is the record between the two keyed stages of stagesJob.
type keyCount struct {
	Key string
	N   int
}

// stagesJob is an ordinary job, written once with no notion of tasks: it
// counts the records of each key of topic in, keys the counts by their
// remainder by 5 and counts those, into topic out ("g:c": the c-th count
// of group g). Every output is independent of the order of the records.
func stagesJob(name string, conn kafka.Conn, in, out string) (*stream.Job, error) {
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{in}}, kafka.String())
	if err != nil {
		return nil, err
	}
	snk, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: out, TransactionTimeout: time.Minute, CheckpointInterval: 200 * time.Millisecond},
		func(v string) (kafka.Message, error) { return kafka.Message{Value: []byte(v)}, nil })
	if err != nil {
		return nil, err
	}
	j := stream.New(name)
	counts := stream.Process(stream.KeyBy(stream.Source(j, "in", src), func(r kafka.Record[string]) string { return string(r.Key) }, state.StringCodec{}),
		"per-key", runningCount[kafka.Record[string]](func(k string, n int) keyCount { return keyCount{k, n} }))
	groups := stream.Process(stream.KeyBy(counts, func(c keyCount) string { return fmt.Sprint(c.N % 5) }, state.StringCodec{}),
		"per-group", runningCount[keyCount](func(g string, n int) string { return fmt.Sprintf("%s:%d", g, n) }))
	stream.SinkTo(groups, "out", snk)
	return j, nil
}

// runningCount counts the records of each key, emitting out(key, count).
func runningCount[IN, OUT any](out func(key string, n int) OUT) func(ctx *stream.Context[string]) (stream.ProcessFunc[string, IN, OUT], error) {
	return func(ctx *stream.Context[string]) (stream.ProcessFunc[string, IN, OUT], error) {
		n, err := state.NewValueState(ctx.State(), "n", state.IntCodec{})
		return stream.ProcessFunc[string, IN, OUT]{Process: func(ctx *stream.Context[string], _ IN, o *stream.Output[OUT]) error {
			c, _ := n.Value()
			c++
			n.Update(c)
			o.Emit(out(ctx.Key(), c))
			return nil
		}}, err
	}
}

// TestRunJobInStages runs stagesJob, an ordinary job, on two instances
// with cluster.RunJob: the engine cuts it into three stages at its two
// KeyBys, creates the two repartition topics, and the group spreads the
// tasks of all three stages over the instances. The committed output must
// be exactly what one process computes: each group's counts 1..120, once.
func TestRunJobInStages(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	name := kafkatest.UniqueName("stages")
	in, out := name+"-in", name+"-out"
	kafkatest.CreateTopic(t, adm, in, 4)
	kafkatest.CreateTopic(t, adm, out, 4)
	kafkatest.DeleteRepartitionTopicsAtEnd(t, adm, name)
	const keys, perKey = 12, 50
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(in))
	if err != nil {
		t.Fatal(err)
	}
	for i := range perKey {
		for k := range keys {
			key := fmt.Sprintf("k%02d", k)
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(key), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cl.Close()

	ctx, stop := context.WithCancel(context.Background())
	checkpoints := t.TempDir()
	var logs lockedBuffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	instances := make([]*cluster.Instance, 2)
	for i := range instances {
		conn := kafka.Conn{Brokers: []string{brokers}, ClientID: fmt.Sprintf("instance-%d", i)}
		j, err := stagesJob(name, conn, in, out)
		if err != nil {
			t.Fatal(err)
		}
		opts := stream.Options{CheckpointDir: checkpoints, CheckpointInterval: 200 * time.Millisecond, OwnershipLease: 3 * time.Second, Logger: logger}
		if i == 0 {
			opts.Control.Addr = "127.0.0.1:0"
		}
		instances[i], err = cluster.StartJob(ctx, j, cluster.Options{
			Group: kafka.GroupOptions{Conn: conn, SessionTimeout: 6 * time.Second},
			Job:   opts,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	recs := kafkatest.ReadCommitted(t, brokers, out, keys*perKey, 2*time.Minute)
	// The instances' tasks: all 12 (3 stages of 4 partitions), each on one
	// instance, running. The output may be complete while the group still
	// moves tasks to the second instance (the first ran them all until it
	// joined): the check waits for the rebalance to end.
	var perStage map[int]int
	var notRunning []string
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		perStage, notRunning = map[int]int{}, nil
		for _, in := range instances {
			for _, ts := range in.Tasks() {
				if ts.State != control.TaskRunning || ts.Runs < 1 {
					notRunning = append(notRunning, fmt.Sprintf("task %s/%d: %+v, want running", ts.Topic, ts.Partition, ts))
				}
				perStage[ts.Stage]++
			}
		}
		if len(notRunning) == 0 && fmt.Sprint(perStage) == "map[0:4 1:4 2:4]" || time.Now().After(deadline) {
			break
		}
	}
	for _, e := range notRunning {
		t.Error(e)
	}
	if fmt.Sprint(perStage) != "map[0:4 1:4 2:4]" {
		t.Errorf("tasks per stage over the instances: %v, want 4 of each of the 3 stages", perStage)
	}
	// The control API of an instance lists its tasks and the group's
	// assignment: every task, each on one member.
	c := control.Client{Addr: instances[0].ControlAddr()}
	var st control.Status
	for deadline := time.Now().Add(time.Minute); ; {
		if st, err = c.Status(ctx); err != nil {
			t.Fatal(err)
		}
		// The assignment is described in the background, a moment after
		// the first status asks.
		if (assigned(st) == 12 && len(st.Cluster.Assignment) == 2) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st.Cluster == nil || st.Job != name || len(st.Cluster.Assignment) != 2 || assigned(st) != 12 {
		t.Errorf("GET /api/v1/job of instance 0: %+v, want the 12 tasks on 2 members", st.Cluster)
	}
	for _, ct := range st.Cluster.Tasks {
		if ct.State != control.TaskRunning || ct.Epoch == 0 || ct.Checkpoint == 0 {
			t.Errorf("task %s/%d in the status: %+v, want running, with an epoch and a completed checkpoint", ct.Topic, ct.Partition, ct)
		}
	}
	stop()
	for i, in := range instances {
		if err := in.Wait(); err != nil {
			t.Errorf("instance %d: %v", i, err)
		}
	}
	// Every line of a task's job names the task and its stage: an
	// instance runs several.
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	for _, line := range lines {
		if !strings.Contains(line, `msg="cluster:`) && (!strings.Contains(line, " task=") || !strings.Contains(line, " stage=")) {
			t.Errorf("a log line names no task and stage: %s", line)
		}
	}
	t.Logf("%d log lines", len(lines))
	var got, want []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	for g := range 5 {
		for c := 1; c <= keys*perKey/5; c++ {
			want = append(want, fmt.Sprintf("%d:%d", g, c))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("committed output: %d records, want %d; first difference: %s", len(got), len(want), firstDifference(got, want))
	}
}

// firstDifference describes where two sorted lists first differ.
func firstDifference(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("at %d: %q, want %q", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d (%s)", len(a), len(b), strings.Join(a[min(len(a), len(b)):min(len(a), len(b)+5)], " "))
}

// TestRunJobRefusesWhatItCannotSplit: a job of a source that cannot be
// split by partition (a generator) is refused at start, naming the
// source; so is a repartition topic that exists with another partition
// count than the job needs, naming the topic and both counts.
func TestRunJobRefusesWhatItCannotSplit(t *testing.T) {
	j := stream.New("generated")
	src, err := generator.New(generator.Options{Count: 10, Splits: 2}, func(i uint64) string { return fmt.Sprint(i) })
	if err != nil {
		t.Fatal(err)
	}
	keyed := stream.KeyBy(stream.Source(j, "numbers", src), func(s string) string { return s }, state.StringCodec{})
	stream.SinkTo(stream.Process(keyed, "count", runningCount[string](func(k string, n int) string { return k })), "out", discard{})
	err = cluster.RunJob(context.Background(), j, cluster.Options{Job: stream.Options{CheckpointDir: t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), `source "numbers" of job "generated"`) || !strings.Contains(err.Error(), "cannot be split by partition") {
		t.Errorf("a generator source on a cluster: %v", err)
	}

	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	name := kafkatest.UniqueName("miscount")
	in, out := name+"-in", name+"-out"
	kafkatest.CreateTopic(t, adm, in, 4)
	kafkatest.CreateTopic(t, adm, out, 4)
	kafkatest.CreateTopic(t, adm, name+"-per-key-0-repartition", 3)
	conn := kafka.Conn{Brokers: []string{brokers}}
	j, err = stagesJob(name, conn, in, out)
	if err != nil {
		t.Fatal(err)
	}
	err = cluster.RunJob(context.Background(), j, cluster.Options{Group: kafka.GroupOptions{Conn: conn}, Job: stream.Options{CheckpointDir: t.TempDir()}})
	if err == nil || !strings.Contains(err.Error(), name+"-per-key-0-repartition\" exists with 3 partitions, but the job needs 4") {
		t.Errorf("a repartition topic of 3 partitions for a job that needs 4: %v", err)
	}
}

// TestRunJobRefusesSinksTasksCannotShare: the tasks of a stage are jobs
// of their own names; a sink that names its output without the job's name
// would have them fence each other. A Kafka sink with a fixed
// transactional id prefix, a file sink and a SQLite sink in a stage of
// four tasks are refused at start, naming the sink, the stage and the
// fix, before any repartition topic is created; the Kafka sink with the
// default prefix is accepted (TestRunJobInStages).
func TestRunJobRefusesSinksTasksCannotShare(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	name := kafkatest.UniqueName("shared-sink")
	kafkatest.CreateTopic(t, adm, name+"-in", 4)
	conn := kafka.Conn{Brokers: []string{brokers}}
	prefixed, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: name + "-out", TransactionalIDPrefix: "fixed"},
		func(v string) (kafka.Message, error) { return kafka.Message{Value: []byte(v)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	files, err := file.NewSink(t.TempDir(), func(b []byte, v string) []byte { return append(b, v...) }, file.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.NewSink(sqlite.Options{Path: filepath.Join(t.TempDir(), "out.db"), Table: "out", Columns: []sqlite.Column{{Name: "v", Type: "TEXT"}}},
		func(v string, row []any) []any { return append(row, v) })
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		sink sink.Sink[string]
		want string
	}{
		{prefixed, `transactional id prefix is "fixed"`},
		{files, "file: the sink writes to directory"},
		{db, "sqlite: the sink writes to"},
	} {
		src, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{name + "-in"}}, kafka.String())
		if err != nil {
			t.Fatal(err)
		}
		j := stream.New(name)
		keyed := stream.KeyBy(stream.Source(j, "in", src), func(r kafka.Record[string]) string { return string(r.Key) }, state.StringCodec{})
		stream.SinkTo(stream.Process(keyed, "count", runningCount[kafka.Record[string]](func(k string, n int) string { return k })), "out", tc.sink)
		// Bounded: a job that is not refused runs until the context ends.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err = cluster.RunJob(ctx, j, cluster.Options{Group: kafka.GroupOptions{Conn: conn}, Job: stream.Options{CheckpointDir: t.TempDir()}})
		cancel()
		if err == nil || !strings.Contains(err.Error(), `sink "out" runs in stage 1, as 4 tasks`) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("a %T in a stage of 4 tasks: %v; want a refusal naming the sink and saying %q", tc.sink, err, tc.want)
		}
	}
	topics, err := adm.ListTopics(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, topic := range topics.Names() {
		if strings.HasPrefix(topic, name+"-") && strings.HasSuffix(topic, "-repartition") {
			t.Errorf("repartition topic %s was created for a refused job", topic)
		}
	}
}

// discard is a sink that is never written: its job is refused first.
type discard struct{ sink.Sink[string] }

// TestRunJobWindowsInStages runs a job of event-time windows with
// cluster.RunJob: records "k:i" happen at i seconds; the job keys them by
// key and counts each key's records per 10-second window. The window
// stage's tasks take their watermark from the writers of the repartition
// topic, the first stage's four tasks (Upstreams from the plan, not set
// by anyone): every window must fire once, with all its 10 records.
func TestRunJobWindowsInStages(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	name := kafkatest.UniqueName("windows")
	in, out := name+"-in", name+"-out"
	kafkatest.CreateTopic(t, adm, in, 4)
	kafkatest.CreateTopic(t, adm, out, 4)
	kafkatest.DeleteRepartitionTopicsAtEnd(t, adm, name)
	const keys, perKey = 12, 50
	// Every partition gets keys, so that every first-stage task has a
	// watermark to pass on.
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range perKey + 1 {
		if i == perKey {
			i = endOfInput // closes every window of the others
		}
		for k := range keys {
			key := fmt.Sprintf("k%02d", k)
			r := &kgo.Record{Key: []byte(key), Value: []byte(fmt.Sprintf("%s:%d", key, i)), Partition: int32(k % 4)}
			if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cl.Close()

	conn := kafka.Conn{Brokers: []string{brokers}}
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{in}}, kafka.String())
	if err != nil {
		t.Fatal(err)
	}
	snk, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: out, TransactionTimeout: time.Minute, CheckpointInterval: 200 * time.Millisecond},
		func(v string) (kafka.Message, error) { return kafka.Message{Value: []byte(v)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New(name)
	timestamp := func(r kafka.Record[string]) time.Time { return eventTime(r.Value) }
	keyed := stream.KeyBy(stream.SourceWithEventTime(j, "in", src, stream.EventTime[kafka.Record[string]]{Timestamp: timestamp}),
		func(r kafka.Record[string]) string { return string(r.Key) }, state.StringCodec{})
	counts := stream.WindowAggregate(keyed, "windows", stream.Tumbling(10*time.Second), timestamp,
		stream.Aggregate[string, kafka.Record[string], int, string]{
			Add:    func(n int, _ kafka.Record[string]) int { return n + 1 },
			Codec:  state.IntCodec{},
			Result: func(k string, w stream.Window, n int) string { return fmt.Sprintf("%s@%d:%d", k, w.Start.Unix(), n) },
		})
	stream.SinkTo(counts, "out", snk)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cluster.RunJob(ctx, j, cluster.Options{
			Group: kafka.GroupOptions{Conn: conn, SessionTimeout: 6 * time.Second},
			Job:   stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 200 * time.Millisecond},
		})
	}()
	const windows = keys * perKey / 10
	recs := kafkatest.ReadCommitted(t, brokers, out, windows, 2*time.Minute)
	stop()
	if err := <-done; err != nil {
		t.Error(err)
	}
	var got, want []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	for k := range keys {
		for w := 0; w < perKey; w += 10 {
			want = append(want, fmt.Sprintf("k%02d@%d:10", k, w))
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("windows: %d records, want %d; first difference: %s", len(got), len(want), firstDifference(got, want))
	}
}

// TestRunJobJoinInStages runs a job that joins two topics by user with
// cluster.RunJob: each input is a stage of its own, and the join's stage
// reads both repartition topics, the same partition of each in one task.
// Every (order, payment) pair of a user must come out once.
func TestRunJobJoinInStages(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	name := kafkatest.UniqueName("join")
	orders, payments, out := name+"-orders", name+"-payments", name+"-out"
	for _, topic := range []string{orders, payments, out} {
		kafkatest.CreateTopic(t, adm, topic, 4)
	}
	kafkatest.DeleteRepartitionTopicsAtEnd(t, adm, name)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for u := range 6 {
		user := fmt.Sprintf("u%d", u)
		for o := range 3 {
			for p := range 2 {
				want = append(want, fmt.Sprintf("%s:o%d:p%d", user, o, p))
			}
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: orders, Key: []byte(user), Value: []byte(fmt.Sprintf("o%d", o))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		for p := range 2 {
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: payments, Key: []byte(user), Value: []byte(fmt.Sprintf("p%d", p))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	cl.Close()

	conn := kafka.Conn{Brokers: []string{brokers}}
	source := func(topic string) *kafka.Source[string] {
		src, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{topic}}, kafka.String())
		if err != nil {
			t.Fatal(err)
		}
		return src
	}
	snk, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: out, TransactionTimeout: time.Minute, CheckpointInterval: 200 * time.Millisecond},
		func(v string) (kafka.Message, error) { return kafka.Message{Value: []byte(v)}, nil })
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New(name)
	byUser := func(r kafka.Record[string]) string { return string(r.Key) }
	joined := stream.InnerJoin(
		stream.KeyBy(stream.Source(j, "orders", source(orders)), byUser, state.StringCodec{}),
		stream.KeyBy(stream.Source(j, "payments", source(payments)), byUser, state.StringCodec{}),
		"join", stream.JoinInputs[kafka.Record[string], kafka.Record[string]]{
			Codec1: state.JSONCodec[kafka.Record[string]]{}, Codec2: state.JSONCodec[kafka.Record[string]]{},
		},
		func(user string, o, p kafka.Record[string]) string { return user + ":" + o.Value + ":" + p.Value })
	stream.SinkTo(joined, "out", snk)

	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- cluster.RunJob(ctx, j, cluster.Options{
			Group: kafka.GroupOptions{Conn: conn, SessionTimeout: 6 * time.Second},
			Job:   stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 200 * time.Millisecond},
		})
	}()
	recs := kafkatest.ReadCommitted(t, brokers, out, len(want), 2*time.Minute)
	stop()
	if err := <-done; err != nil {
		t.Error(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, string(r.Value))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("joined: %d records, want %d; first difference: %s", len(got), len(want), firstDifference(got, want))
	}
}

// lockedBuffer is a buffer the instances' loggers write to concurrently.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// assigned counts the tasks of the group's assignment in st.
func assigned(st control.Status) int {
	n := 0
	if st.Cluster != nil {
		for _, m := range st.Cluster.Assignment {
			n += len(m.Tasks)
		}
	}
	return n
}

// TestTwoJobsOfOneNameAreRefused starts an instance of a job, then an
// instance of another job with the same name (the same operators over
// another input topic): they would share the group and, their operators
// having the same names, the repartition topics, so that each would read
// the other's records. The second is refused at its first assignment,
// before it runs a task, with an error naming the other member's topics
// and the fix; the first goes on.
func TestTwoJobsOfOneNameAreRefused(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	name := kafkatest.UniqueName("same-name")
	kafkatest.DeleteRepartitionTopicsAtEnd(t, adm, name)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	start := func(input string) *cluster.Instance {
		t.Helper()
		kafkatest.CreateTopic(t, adm, input, 2)
		kafkatest.CreateTopic(t, adm, input+"-out", 2)
		conn := kafka.Conn{Brokers: []string{brokers}, ClientID: input}
		j, err := stagesJob(name, conn, input, input+"-out")
		if err != nil {
			t.Fatal(err)
		}
		in, err := cluster.StartJob(ctx, j, cluster.Options{
			Group: kafka.GroupOptions{Conn: conn, SessionTimeout: 6 * time.Second},
			Job:   stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 200 * time.Millisecond, OwnershipLease: 3 * time.Second},
		})
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	first := start(name + "-orders")
	for len(first.Tasks()) == 0 {
		time.Sleep(50 * time.Millisecond) // the first has its tasks before the second joins
	}
	second := start(name + "-payments")
	done := make(chan error, 1)
	go func() { done <- second.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute): // a guard against a hang
		t.Fatal("the second job of the same name was not refused within 2 minutes")
	}
	want := "another job named \"" + name + "\", or another version of this job with other stages, shares the group"
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), name+"-orders") {
		t.Fatalf("the second job of the same name ended with %v, want an error containing %q and the first job's input topic", err, want)
	}
	t.Logf("refused: %v", err)
	for _, ct := range second.Tasks() {
		t.Errorf("the refused instance still holds task %s/%d (%s)", ct.Topic, ct.Partition, ct.State)
	}
	stop()
	if err := first.Wait(); err != nil {
		t.Errorf("the first job: %v", err)
	}
}
