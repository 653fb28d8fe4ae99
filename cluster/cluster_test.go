package cluster_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/cluster"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/connectors/postgres"
	"github.com/exactlyonce/exactly/internal/crashtest/crashtesting"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/s3test"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/internal/testlog"
	"github.com/exactlyonce/exactly/pipeline"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// The environment an instance process reads (TestClusterInstance).
const (
	envInstance = "EXACTLY_CLUSTER_INSTANCE" // the instance's name; set only in instance processes
	envIn       = "EXACTLY_CLUSTER_IN"
	envOut      = "EXACTLY_CLUSTER_OUT"
	envGroup    = "EXACTLY_CLUSTER_GROUP"
	envCkpt     = "EXACTLY_CLUSTER_CHECKPOINTS"
	envRekeyed  = "EXACTLY_CLUSTER_REKEYED"  // the repartition topic of the two-stage job; empty for one stage
	envWindows  = "EXACTLY_CLUSTER_WINDOWS"  // "1": the two-stage job's second stage counts per event-time window
	envState    = "EXACTLY_CLUSTER_STATE"    // the instance's Pebble directory, for the windowed stage's state
	envRunJob   = "EXACTLY_CLUSTER_RUNJOB"   // the name of the job written once that cluster.RunJob runs (ordinaryJob); empty for the hand-wired jobs
	envTable    = "EXACTLY_CLUSTER_TABLE"    // ordinaryJob's PostgreSQL table of the running counts
	envPipeline = "EXACTLY_CLUSTER_PIPELINE" // the file of the YAML pipeline an instance runs (exactly run --cluster), instead of a Go job
)

const (
	clusterKeys   = 24
	clusterPerKey = 250
	// rekeyGroups is the number of keys of the two-stage job's second stage.
	rekeyGroups = 8
	// inputPartitions is the number of partitions of the input topic: the
	// first stage's tasks, each one writer of the repartition topic.
	inputPartitions = 6
	// Record "k:i" happens at i seconds of event time; the windowed second
	// stage counts each group's records per clusterWindow.
	clusterWindow = 10 * time.Second
	// endOfInput is the event time (in seconds) of one last record per key
	// of the windowed job's input, which closes every window of the others.
	endOfInput = 100_000
	// produceEvery paces the input so that records flow through every fault.
	produceEvery = 6 * time.Millisecond
	// roundsPerPhase is how many rounds of input (record "k:i" of every
	// key) the producer writes per phase of breakInstances before it waits
	// for the next: about 4.5 s of input at produceEvery.
	roundsPerPhase = 31
	// sessionTimeout is the group's, the least the broker allows by default.
	sessionTimeout = 6 * time.Second
	ownershipLease = 3 * time.Second
)

// TestClusterInstance is one instance of the cluster's job, run as a
// separate process by TestClusterMovesTasks; it does nothing otherwise.
// SIGTERM stops it cleanly.
func TestClusterInstance(t *testing.T) {
	if os.Getenv(envInstance) == "" {
		t.Skip("an instance process of TestClusterMovesTasks")
	}
	brokers := testenv.Kafka(t)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	conn := kafka.Conn{Brokers: []string{brokers}, ClientID: os.Getenv(envInstance)}
	if file := os.Getenv(envPipeline); file != "" {
		p, err := pipeline.Load(file)
		if err == nil {
			err = p.Run(ctx, pipeline.RunOptions{Cluster: true})
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	if name := os.Getenv(envRunJob); name != "" {
		dsn, table := "", os.Getenv(envTable)
		if table != "" {
			dsn = testenv.Postgres(t)
		}
		j, err := ordinaryJob(name, conn, os.Getenv(envIn), os.Getenv(envOut), dsn, table)
		if err == nil {
			err = cluster.RunJob(ctx, j, cluster.Options{
				Group:                 kafka.GroupOptions{Conn: conn, Group: os.Getenv(envGroup), SessionTimeout: sessionTimeout},
				Job:                   stream.Options{CheckpointDir: os.Getenv(envCkpt), CheckpointInterval: 200 * time.Millisecond, OwnershipLease: ownershipLease},
				RepartitionPartitions: 4,
			})
		}
		if err != nil {
			t.Fatal(err)
		}
		return
	}
	in, rekeyed, windows := os.Getenv(envIn), os.Getenv(envRekeyed), os.Getenv(envWindows) == "1"
	topics := []string{in}
	if rekeyed != "" {
		topics = append(topics, rekeyed)
	}
	err := cluster.Run(ctx, "count", cluster.Options{
		Group: kafka.GroupOptions{Conn: conn, Group: os.Getenv(envGroup), Topics: topics, SessionTimeout: sessionTimeout},
		Job: stream.Options{
			CheckpointDir:      os.Getenv(envCkpt),
			CheckpointInterval: 200 * time.Millisecond,
			OwnershipLease:     ownershipLease,
		},
	}, func(name string, task cluster.Task) (*stream.Job, error) {
		switch {
		case task.Topic == in && rekeyed != "":
			return rekeyJob(name, conn, task, rekeyed, windows)
		case windows:
			// On Pebble, in one directory for the instance's tasks, as a
			// user would configure it: cluster.Run gives each task its own
			// under it.
			j, err := windowJob(name, conn, task, os.Getenv(envOut))
			if err == nil {
				j.SetStateBackend(state.BackendConfig{Kind: state.PebbleBackend, Dir: os.Getenv(envState), MemoryBudget: state.MinMemoryBudget})
			}
			return j, err
		}
		return countJob(name, conn, task, os.Getenv(envOut))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// rekeyJob builds one task of the two-stage job's first stage: its
// partition of the input → the repartition topic, each record "kNN:i"
// keyed by its group "gM", M = NN mod rekeyGroups. The Kafka sink's
// partitioner sends each group to one partition, read by one task of the
// second stage; its transactions commit at the task's checkpoints, and
// the second stage reads read_committed. With windows the task reads
// event time and its sink writes its watermarks into the topic.
func rekeyJob(name string, conn kafka.Conn, task cluster.Task, rekeyed string, windows bool) (*stream.Job, error) {
	src, err := kafka.NewSource(task.SourceOptions(kafka.SourceOptions{Conn: conn}), kafka.String())
	if err != nil {
		return nil, err
	}
	snk, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: rekeyed, TransactionTimeout: time.Minute, Watermarks: windows},
		func(v string) (kafka.Message, error) {
			k, _, _ := strings.Cut(v, ":")
			n, err := strconv.Atoi(strings.TrimPrefix(k, "k"))
			return kafka.Message{Key: []byte("g" + strconv.Itoa(n%rekeyGroups)), Value: []byte(v)}, err
		})
	if err != nil {
		return nil, err
	}
	j := stream.New(name)
	var in stream.Stream[kafka.Record[string]]
	if windows {
		// An input partition without keys goes idle instead of holding
		// the second stage's event time back.
		in = stream.SourceWithEventTime(j, "in", src, stream.EventTime[kafka.Record[string]]{
			Timestamp: func(r kafka.Record[string]) time.Time { return eventTime(r.Value) }, IdleTimeout: 3 * time.Second})
	} else {
		in = stream.Source(j, "in", src)
	}
	values := stream.Map(in, func(r kafka.Record[string]) string { return r.Value })
	stream.SinkTo(values, "rekeyed", snk)
	return j, nil
}

// keyEvent is a record between the stages of ordinaryJob: the running
// count N of a key's records, and the event time At (seconds) of the
// record that made it.
type keyEvent struct {
	Key   string
	N, At int
}

// ordinaryJob is the job of TestClusterRunsAJobWrittenOnce, written once
// with no notion of tasks or stages: records "kNN:i" (event time i
// seconds) → a running count per key, written to the PostgreSQL table
// table (key, n) when table is set → an interval join of each record with
// the count it made (same key, same event time) → keyed by group "gM"
// (M = NN mod rekeyGroups) → a count per group and 10 s tumbling window of
// event time → the output topic. cluster.RunJob cuts it into four stages:
// the source, the count, the join (reading two repartition topics, the
// records and the counts) and the windows.
func ordinaryJob(name string, conn kafka.Conn, in, out, dsn, table string) (*stream.Job, error) {
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{in}}, kafka.String())
	if err != nil {
		return nil, err
	}
	snk, err := windowSink(kafka.SinkOptions{Conn: conn, Topic: out, TransactionTimeout: time.Minute, CheckpointInterval: 200 * time.Millisecond})
	if err != nil {
		return nil, err
	}
	j := stream.New(name)
	records := stream.SourceWithEventTime(j, "in", src, stream.EventTime[kafka.Record[string]]{
		Timestamp: func(r kafka.Record[string]) time.Time { return eventTime(r.Value) }, IdleTimeout: 3 * time.Second})
	counted := stream.Process(stream.KeyBy(records, func(r kafka.Record[string]) string { return string(r.Key) }, state.StringCodec{}), "per-key",
		func(ctx *stream.Context[string]) (stream.ProcessFunc[string, kafka.Record[string], keyEvent], error) {
			n, err := state.NewValueState(ctx.State(), "n", state.IntCodec{})
			return stream.ProcessFunc[string, kafka.Record[string], keyEvent]{
				Process: func(ctx *stream.Context[string], r kafka.Record[string], o *stream.Output[keyEvent]) error {
					c, _ := n.Value()
					c++
					n.Update(c)
					o.Emit(keyEvent{Key: ctx.Key(), N: c, At: int(eventTime(r.Value).Unix())})
					return nil
				},
			}, err
		})
	if table != "" {
		rows, err := postgres.NewSink(postgres.Options{DSN: dsn, Table: table, Columns: []postgres.Column{{Name: "key"}, {Name: "n"}}},
			func(e keyEvent, row []any) []any { return append(row, e.Key, int64(e.N)) })
		if err != nil {
			return nil, err
		}
		stream.SinkTo(counted, "counts", rows)
	}
	group := func(e keyEvent) string {
		n, _ := strconv.Atoi(strings.TrimPrefix(e.Key, "k"))
		return "g" + strconv.Itoa(n%rekeyGroups)
	}
	at := func(e keyEvent) time.Time { return time.Unix(int64(e.At), 0) }
	// Each record meets the count it made: the same key and event time.
	byKey := func(r kafka.Record[string]) string { return string(r.Key) }
	matched := stream.IntervalJoin(stream.KeyBy(records, byKey, state.StringCodec{}),
		stream.KeyBy(counted, func(e keyEvent) string { return e.Key }, state.StringCodec{}), "match", stream.Interval{},
		stream.JoinInputs[kafka.Record[string], keyEvent]{
			Time1: func(r kafka.Record[string]) time.Time { return eventTime(r.Value) }, Time2: at,
			Codec1: state.JSONCodec[kafka.Record[string]]{}, Codec2: state.JSONCodec[keyEvent]{},
		},
		func(_ string, _ kafka.Record[string], e keyEvent) keyEvent { return e })
	windows := stream.WindowAggregate(stream.KeyBy(matched, group, state.StringCodec{}), "per-group", stream.Tumbling(clusterWindow), at,
		stream.Aggregate[string, keyEvent, int, string]{
			Add:   func(n int, _ keyEvent) int { return n + 1 },
			Codec: state.IntCodec{},
			Result: func(g string, w stream.Window, n int) string {
				return g + "@" + strconv.FormatInt(w.Start.Unix(), 10) + ":" + strconv.Itoa(n)
			},
		})
	stream.SinkTo(windows, "out", snk)
	return j, nil
}

// windowSink writes the windowed jobs' results "gM@start:count" to a
// Kafka topic, keyed by their group gM.
func windowSink(o kafka.SinkOptions) (*kafka.Sink[string], error) {
	return kafka.NewSink(o, func(v string) (kafka.Message, error) {
		g, _, _ := strings.Cut(v, "@")
		return kafka.Message{Key: []byte(g), Value: []byte(v)}, nil
	})
}

// eventTime is the event time of record "k:i": i seconds.
func eventTime(v string) time.Time {
	_, i, _ := strings.Cut(v, ":")
	n, _ := strconv.Atoi(i)
	return time.Unix(int64(n), 0)
}

// windowJob builds one task of the windowed job's second stage: its
// partition of the repartition topic, whose watermark is the least of the
// first stage's tasks' → a count per group and clusterWindow of event
// time → the output topic, as "gM@start:count".
func windowJob(name string, conn kafka.Conn, task cluster.Task, out string) (*stream.Job, error) {
	src, err := kafka.NewSource(task.SourceOptions(kafka.SourceOptions{Conn: conn, Upstreams: inputPartitions}), kafka.String())
	if err != nil {
		return nil, err
	}
	snk, err := windowSink(kafka.SinkOptions{Conn: conn, Topic: out, TransactionTimeout: time.Minute})
	if err != nil {
		return nil, err
	}
	j := stream.New(name)
	timestamp := func(r kafka.Record[string]) time.Time { return eventTime(r.Value) }
	in := stream.SourceWithEventTime(j, "in", src, stream.EventTime[kafka.Record[string]]{Timestamp: timestamp})
	keyed := stream.KeyBy(in, func(r kafka.Record[string]) string { return string(r.Key) }, state.StringCodec{})
	counts := stream.WindowAggregate(keyed, "windows", stream.Tumbling(clusterWindow), timestamp,
		stream.Aggregate[string, kafka.Record[string], int, string]{
			Add:   func(n int, _ kafka.Record[string]) int { return n + 1 },
			Codec: state.IntCodec{},
			Result: func(g string, w stream.Window, n int) string {
				return g + "@" + strconv.FormatInt(w.Start.Unix(), 10) + ":" + strconv.Itoa(n)
			},
		})
	stream.SinkTo(counts, "out", snk)
	return j, nil
}

// countJob builds one task's job: its partition of the input → a running
// count per record key → the output topic. Every input record "k:i"
// becomes "k:c", k the record's key and c the number of records of key k
// so far; the input is partitioned by key, so each key's count lives in
// one task.
func countJob(name string, conn kafka.Conn, task cluster.Task, out string) (*stream.Job, error) {
	src, err := kafka.NewSource(task.SourceOptions(kafka.SourceOptions{Conn: conn}), kafka.String())
	if err != nil {
		return nil, err
	}
	snk, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: out, TransactionTimeout: time.Minute},
		func(v string) (kafka.Message, error) {
			k, _, _ := strings.Cut(v, ":")
			return kafka.Message{Key: []byte(k), Value: []byte(v)}, nil
		})
	if err != nil {
		return nil, err
	}
	j := stream.New(name)
	keyed := stream.KeyBy(stream.Source(j, "in", src), func(r kafka.Record[string]) string { return string(r.Key) }, state.StringCodec{})
	counts := stream.Process(keyed, "count", func(ctx *stream.Context[string]) (stream.ProcessFunc[string, kafka.Record[string], string], error) {
		n, err := state.NewValueState(ctx.State(), "n", state.IntCodec{})
		return stream.ProcessFunc[string, kafka.Record[string], string]{
			Process: func(ctx *stream.Context[string], r kafka.Record[string], o *stream.Output[string]) error {
				c, _ := n.Value()
				c++
				n.Update(c)
				o.Emit(ctx.Key() + ":" + strconv.Itoa(c))
				return nil
			},
		}, err
	})
	stream.SinkTo(counts, "out", snk)
	return j, nil
}

// TestClusterMovesTasks runs the count job as separate instance processes
// on one consumer group while the input flows, and breaks them: SIGKILL
// one, add one, SIGSTOP one past its session and lease and resume it (a
// zombie), stop two cleanly. The committed output must be exactly that of
// a failure-free run: every "k:c" once.
func TestClusterMovesTasks(t *testing.T) {
	var want []string
	for k := range clusterKeys {
		want = append(want, counts(fmt.Sprintf("k%02d", k), clusterPerKey)...)
	}
	breakInstances(t, oneStage, want)
}

// TestClusterMovesStages runs the same faults on a job of two stages:
// the first re-keys the input through a repartition topic (Kafka
// transactions), the second counts per new key. Each group's count must
// run from 1 to its number of records exactly once.
func TestClusterMovesStages(t *testing.T) {
	var want []string
	for g := range rekeyGroups {
		want = append(want, counts("g"+strconv.Itoa(g), clusterPerKey*clusterKeys/rekeyGroups)...)
	}
	breakInstances(t, twoStages, want)
}

// TestClusterMovesWindows runs the same faults on the two-stage job whose
// second stage counts each group's records per 10 s tumbling window of
// event time. Its watermark comes through the repartition topic from the
// six tasks of the first stage, which move between instances, restart
// from their checkpoints and are paused with b: every window must fire
// exactly once with all its records (3 keys × 10 s = 30), none late.
func TestClusterMovesWindows(t *testing.T) {
	breakInstances(t, windowedStages, groupWindows())
}

// groupWindows returns the output of the windowed jobs: every group's
// windows, each with the records of its clusterKeys / rekeyGroups keys.
func groupWindows() []string {
	var want []string
	per := clusterKeys / rekeyGroups * int(clusterWindow/time.Second)
	for g := range rekeyGroups {
		for w := 0; w < clusterPerKey; w += int(clusterWindow / time.Second) {
			want = append(want, fmt.Sprintf("g%d@%d:%d", g, w, per))
		}
	}
	return want
}

// TestClusterRunsAPipeline runs the same faults on clusterPipeline, a
// YAML pipeline run by each instance as exactly run --cluster runs it:
// the same two key_bys and window as ordinaryJob (without the join and
// the table), cut into three stages. Every window must fire exactly once
// with all its records. Its group uses KIP-848's consumer protocol
// (group_protocol: consumer), the other tests' the classic one: the
// broker assigns, and the members reconcile on their heartbeats.
func TestClusterRunsAPipeline(t *testing.T) {
	breakInstances(t, yamlPipeline, groupWindows())
}

// clusterPipeline is the pipeline of TestClusterRunsAPipeline: records
// "kNN:i" (event time i seconds) → a running count per key → keyed by
// group "gM" (M = NN mod rekeyGroups) → a count per group and 10 s
// tumbling window of event time → "gM@start:count" into topic out. Its
// session timeout and ownership lease are the Go jobs' (the faults are
// timed to them); its group protocol is KIP-848's.
func clusterPipeline(name, brokers, in, out, group, ckpt string) string {
	return fmt.Sprintf(`name: %s
source: {kind: kafka, brokers: [%q], topics: [%s]}
decode: {format: raw}
event_time: {field: 'int(split(value, ":")[1]) * 1000', idle_timeout: 3s}
transforms:
  - map: {key: 'split(value, ":")[0]'}
  - key_by: key
  - aggregate: {name: per-key, values: {n: count()}}
  - map: {group: '"g" + string(int(trimPrefix(key, "k")) %% %d)'}
  - key_by: group
  - aggregate:
      name: per-group
      window: {kind: tumbling, size: %s}
      values: {n: count()}
  - map: {out: 'key + "@" + string(window_start.Unix()) + ":" + string(n)'}
sink: {kind: kafka, brokers: [%q], topic: %s, key: 'split(out, "@")[0]', format: csv}
checkpoint: {interval: 200ms, storage: %q}
cluster: {group: %s, group_protocol: consumer, session_timeout: %s, ownership_lease: %s, repartition_partitions: 4}
`, name, brokers, in, rekeyGroups, clusterWindow, brokers, out, ckpt, group, sessionTimeout, ownershipLease)
}

// TestClusterRunsAJobWrittenOnce runs the same faults on ordinaryJob, a
// job written once that cluster.RunJob cuts into four stages (the source,
// a running count per key, an interval join of the records with their
// counts, a count per group and window of event time) with the four
// repartition topics it creates: nobody wires stages, topics, watermarks
// or upstream counts. Every window must fire exactly once with all its
// records, as in a single process: a record lost or doubled anywhere —
// in the count, in either input of the join, in the windows — changes a
// window's count.
func TestClusterRunsAJobWrittenOnce(t *testing.T) {
	breakInstances(t, writtenOnce, groupWindows())
}

// counts returns "key:1" … "key:n".
func counts(key string, n int) []string {
	out := make([]string, n)
	for c := range n {
		out[c] = key + ":" + strconv.Itoa(c+1)
	}
	return out
}

// The jobs breakInstances runs.
type clusterJob int

const (
	oneStage       clusterJob = iota // a running count per key
	twoStages                        // re-key, then a running count per group
	windowedStages                   // re-key, then a count per group and window
	writtenOnce                      // ordinaryJob, in the stages cluster.RunJob makes
	yamlPipeline                     // clusterPipeline, run as exactly run --cluster runs it
)

// breakInstances runs the faults of TestClusterMovesTasks on job and
// checks that the committed output holds every value of want exactly
// once, and nothing else.
func breakInstances(t *testing.T, job clusterJob, want []string) {
	brokers := testenv.Kafka(t)
	_ = testenv.S3(t) // skips without the S3 server before anything is set up
	began := time.Now()
	t.Cleanup(func() { t.Logf("test and clean-up done after %.1fs", time.Since(began).Seconds()) })
	adm := kafkatest.Admin(t, brokers)
	in, out, group := kafkatest.UniqueName("cluster-in"), kafkatest.UniqueName("cluster-out"), kafkatest.UniqueName("cluster-group")
	kafkatest.CreateTopic(t, adm, in, inputPartitions)
	// As many output partitions as input partitions: the output is keyed
	// by the input's key, so output partition p holds the counts of input
	// partition p, and a task's output can be watched on its own.
	kafkatest.CreateTopic(t, adm, out, 6)
	ckpt := s3test.Location(t, "cluster")
	t.Cleanup(func() { _, _ = adm.DeleteGroup(context.Background(), group) })

	env := []string{envIn + "=" + in, envOut + "=" + out, envGroup + "=" + group, envCkpt + "=" + ckpt, testenv.ParentHoldsLock}
	var table string
	if job == writtenOnce {
		name := kafkatest.UniqueName("written-once")
		env = append(env, envRunJob+"="+name)
		// The running counts also go to PostgreSQL (fenced mode), whose
		// committer sessions a paused instance must not keep locked
		// (docs/scale-out.md, "Two defects it found").
		// EXACTLY_CLUSTER_POSTGRES=0 leaves PostgreSQL out.
		if os.Getenv("EXACTLY_CLUSTER_POSTGRES") != "0" {
			table = strings.ReplaceAll(name, "-", "_")
			createCountsTable(t, table)
			env = append(env, envTable+"="+table)
		}
		kafkatest.DeleteRepartitionTopicsAtEnd(t, adm, name)
	}
	if job == yamlPipeline {
		name := kafkatest.UniqueName("pipeline")
		dir, err := os.MkdirTemp("", "cluster-pipeline")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		file := filepath.Join(dir, "pipeline.yaml")
		if err := os.WriteFile(file, []byte(clusterPipeline(name, brokers, in, out, group, ckpt)), 0o600); err != nil {
			t.Fatal(err)
		}
		env = append(env, envPipeline+"="+file)
		kafkatest.DeleteRepartitionTopicsAtEnd(t, adm, name)
	}
	if job == twoStages || job == windowedStages {
		rekeyed := kafkatest.UniqueName("cluster-rekeyed")
		kafkatest.CreateTopic(t, adm, rekeyed, 4)
		env = append(env, envRekeyed+"="+rekeyed)
	}
	if job == windowedStages {
		env = append(env, envWindows+"=1")
	}
	// Not t.TempDir: a zombie instance may still write into it when the
	// test ends.
	stateDir, err := os.MkdirTemp("", "cluster-state")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(stateDir) })
	c := &instances{t: t, env: env, state: stateDir}
	t.Cleanup(func() {
		c.killAll()
		if t.Failed() {
			c.dumpLogs()
		}
	})

	input := startInput(t, brokers, in, job == windowedStages || job == writtenOnce || job == yamlPipeline)

	a, b, cc := c.start("a"), c.start("b"), c.start("c")
	// Each phase's output must come from input produced after the phase
	// began: input the instances had all consumed before a fault could
	// not show that they recover from it.
	progress := func(what string) { waitForOutput(t, c, adm, out, what, input) }
	progress("output from the first three instances")

	// Each fault is aimed at an instance that runs tasks: the group may
	// balance a moment after the first output flows.
	a.waitForTasks(t)
	moving := a.tasks()
	t.Log("SIGKILL a")
	killed := time.Now()
	a.signal(syscall.SIGKILL)
	a.expectEnd()
	// The offsets once a is gone: a commit a sent just before its death is
	// not counted as its tasks' output flowing again.
	a.reaped(t)
	t.Logf("a reaped after %.1fs", time.Since(killed).Seconds())
	before := committedEnds(t, adm, out)
	progress("output after a was killed")
	if job == oneStage {
		logRecovery(t, adm, out, moving, before, killed)
	}

	d := c.start("d")
	progress("output after d joined")

	t.Logf("SIGSTOP b for %v (session %v, lease %v), then SIGCONT", 2*sessionTimeout+ownershipLease, sessionTimeout, ownershipLease)
	b.waitForTasks(t)
	paused := b.running()
	takenBefore := c.takeovers(b, paused)
	b.signal(syscall.SIGSTOP)
	time.Sleep(2*sessionTimeout + ownershipLease) // the fault itself: b is paused this long
	progress("output while b is paused")
	takenDuring := c.takeovers(b, paused) - takenBefore
	b.signal(syscall.SIGCONT)
	// A resumed zombie may find a sink of its own fenced and stop itself:
	// that is how it must end, if it ends (stopAll checks the reason).
	b.zombie.Store(true)
	progress("output after b resumed")

	c.start("e")
	t.Log("SIGTERM c and d")
	termed := time.Now()
	cc.signal(syscall.SIGTERM)
	d.signal(syscall.SIGTERM)
	cc.expectEnd()
	d.expectEnd()
	cc.wait(t, time.Minute)
	d.wait(t, time.Minute)
	t.Logf("c and d stopped after %.1fs", time.Since(termed).Seconds())
	progress("output after c and d left")

	finishing := time.Now()
	if err := input.finish(); err != nil {
		t.Fatal(err)
	}
	t.Logf("the rest of the input written after %.1fs", time.Since(finishing).Seconds())
	recs := kafkatest.ReadCommitted(t, brokers, out, len(want), 2*time.Minute)
	t.Logf("every window read after %.1fs", time.Since(finishing).Seconds())
	checkOnce(t, recs, want)
	c.stopAll(t)
	t.Logf("instances stopped after %.1fs", time.Since(finishing).Seconds())
	if table != "" {
		checkCountsTable(t, table)
	}
	// The pause must have made b a zombie: another instance took over the
	// checkpoint storage of a task b ran, while b was stopped. How b then
	// finds out differs from run to run (its lease renewal fails, the
	// Kafka sink's abort on close finds its transactional id taken over,
	// or the group's "lost" event stops its tasks first, with nothing to
	// abort: CI saw each), and stopAll checks how it ended. Without the
	// takeover the test would not have tried what it claims to.
	if takenDuring == 0 {
		t.Errorf("instance b's tasks %v were not taken over while it was stopped", slices.Sorted(maps.Keys(paused)))
	}
	t.Logf("faults: 1 SIGKILL (a), 1 SIGSTOP of %v (b: its tasks' storages taken over %d times during the pause), 2 clean stops (c, d); 5 instances started (a-e); task runs started: %d; test done after %.1fs", 2*sessionTimeout+ownershipLease, takenDuring, c.taskStarts(), time.Since(began).Seconds())
}

// taskStarts counts the task runs every instance started.
func (c *instances) taskStarts() int {
	n := 0
	for _, in := range c.all {
		n += strings.Count(in.out.String(), "cluster: task assigned: starting it")
	}
	return n
}

// input is breakInstances' producer of the input, written phase by
// phase: roundsPerPhase rounds when it starts and per release, all the
// rest after finish. A producer on the wall clock alone finished the
// input before b's pause when the machine ran the test slowly, and
// the output then could not grow while b was paused (CI of 125f6db).
type input struct {
	more   chan struct{} // one receive per released phase; closed by finish
	done   chan error
	closed sync.Once
}

func startInput(t *testing.T, brokers, topic string, end bool) *input {
	in := &input{more: make(chan struct{}, 16), done: make(chan error, 1)}
	go func() { in.done <- produce(brokers, topic, end, in.more) }()
	t.Cleanup(func() { in.closed.Do(func() { close(in.more) }) })
	return in
}

// release lets the producer write the next phase's rounds.
func (in *input) release() { in.more <- struct{}{} }

// finish lets the producer write all the input that is left, and waits
// until it has.
func (in *input) finish() error {
	in.closed.Do(func() { close(in.more) })
	return <-in.done
}

// produce writes clusterPerKey records "k:i" per key, keyed by "k",
// paced by produceEvery, roundsPerPhase rounds of them per receive from
// more and the rest once more is closed; with end, then one record
// "k:endOfInput" per key.
func produce(brokers, topic string, end bool, more <-chan struct{}) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(topic))
	if err != nil {
		return err
	}
	defer cl.Close()
	tick := time.NewTicker(produceEvery)
	defer tick.Stop()
	last := clusterPerKey
	if end {
		last++
	}
	allowed := roundsPerPhase
	for i := range last {
		for i >= allowed && more != nil {
			if _, ok := <-more; ok {
				allowed += roundsPerPhase
			} else {
				more = nil
			}
		}
		if i == clusterPerKey {
			i = endOfInput
		}
		for k := range clusterKeys {
			<-tick.C
			key := fmt.Sprintf("k%02d", k)
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Key: []byte(key), Value: []byte(key + ":" + strconv.Itoa(i))}).FirstErr(); err != nil {
				return err
			}
		}
	}
	return nil
}

// waitForOutput releases the next phase of input and waits until out's
// committed end offsets grow past where they were before it, failing at
// once when an instance that should run has ended.
func waitForOutput(t *testing.T, c *instances, adm *kadm.Client, out, what string, input *input) {
	t.Helper()
	start := committedEnd(t, adm, out)
	input.release()
	began := time.Now()
	kafkatest.WaitFor(t, 2*time.Minute, what, func() bool {
		if in := c.ended(); in != nil {
			t.Fatalf("waiting for %s: instance %s ended", what, in.name)
		}
		return committedEnd(t, adm, out) > start
	})
	t.Logf("%s after %.1fs", what, time.Since(began).Seconds())
}

func committedEnd(t *testing.T, adm *kadm.Client, topic string) int64 {
	var n int64
	for _, o := range committedEnds(t, adm, topic) {
		n += o
	}
	return n
}

// committedEnds returns the last stable offset of each of topic's partitions.
func committedEnds(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	offs, err := adm.ListCommittedOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	m := map[int32]int64{}
	offs.Each(func(o kadm.ListedOffset) { m[o.Partition] = o.Offset })
	return m
}

// logRecovery waits until the output partition of each task a killed
// instance ran has grown past before, and logs how long after the kill
// each did: the time from an instance's death to its partitions' output
// flowing again (a measurement, not a check: docs/benchmarks.md).
func logRecovery(t *testing.T, adm *kadm.Client, out string, moving []int32, before map[int32]int64, killed time.Time) {
	t.Helper()
	var parts []string
	for _, p := range moving {
		kafkatest.WaitFor(t, 2*time.Minute, fmt.Sprintf("output of partition %d after the kill", p), func() bool {
			return committedEnds(t, adm, out)[p] > before[p]
		})
		parts = append(parts, fmt.Sprintf("partition %d after %.1fs", p, time.Since(killed).Seconds()))
	}
	t.Logf("recovery: the killed instance's tasks flowed again: %s (session timeout %v, ownership lease %v, checkpoint interval 200ms; polled every 20ms)",
		strings.Join(parts, ", "), sessionTimeout, ownershipLease)
}

// checkOnce verifies that out holds every value of want exactly once,
// and nothing else.
func checkOnce(t *testing.T, out []*kgo.Record, want []string) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range out {
		seen[string(r.Value)]++
	}
	bad := 0
	for _, v := range want {
		if seen[v] != 1 && bad < 20 {
			t.Errorf("output %q seen %d times, want once", v, seen[v])
			bad++
		}
		delete(seen, v)
	}
	for v, n := range seen {
		if bad < 30 {
			t.Errorf("unexpected output %q (%d times)", v, n)
			bad++
		}
	}
	t.Logf("committed output: %d records, want %d", len(out), len(want))
}

// instances are the instance processes of one test.
type instances struct {
	t     *testing.T
	env   []string
	state string // the instances' state directories are under it
	mu    sync.Mutex
	all   []*instance
}

// instance is one instance process and its output.
type instance struct {
	name string
	cmd  *exec.Cmd
	out  *testlog.Buffer
	done chan error
	// ends is set when the test ended the process on purpose.
	ends atomic.Bool
	// zombie is set once the process was paused past its lease and
	// resumed: it may stop itself, fenced.
	zombie atomic.Bool
}

func (in *instance) expectEnd() { in.ends.Store(true) }

// reaped waits until the process has ended.
func (in *instance) reaped(t *testing.T) {
	t.Helper()
	select {
	case err := <-in.done:
		in.done <- err
	case <-time.After(time.Minute):
		t.Fatalf("instance %s did not end within a minute of its SIGKILL", in.name)
	}
}

// waitForTasks waits until the instance runs at least one task.
func (in *instance) waitForTasks(t *testing.T) {
	t.Helper()
	began := time.Now()
	kafkatest.WaitFor(t, 2*time.Minute, "instance "+in.name+" to run a task", func() bool { return len(in.tasks()) > 0 })
	if d := time.Since(began); d > 5*time.Second {
		t.Logf("instance %s ran no task for %.1fs", in.name, d.Seconds())
	}
}

// tasks returns the partitions of the tasks the instance runs, as its log
// tells: those it started and has not stopped since. A task is its topic
// and partition: a job of stages runs a partition 0 of each topic.
func (in *instance) tasks() []int32 {
	ps := slices.Sorted(maps.Values(in.running()))
	return slices.Compact(ps)
}

// running returns the tasks the instance runs, as its log tells, by name
// (topic/partition), with their partitions.
func (in *instance) running() map[string]int32 {
	running := map[string]int32{}
	for _, line := range strings.Split(in.out.String(), "\n") {
		_, task, ok := strings.Cut(line, " task=")
		if !ok {
			continue
		}
		task = strings.Fields(task)[0]
		_, part, _ := strings.Cut(task, "/")
		p, err := strconv.Atoi(part)
		if err != nil {
			continue
		}
		switch {
		case strings.Contains(line, "cluster: task assigned: starting it"):
			running[task] = int32(p)
		case strings.Contains(line, "cluster: stopping task"):
			delete(running, task)
		}
	}
	return running
}

// takeovers counts the times the instances other than but took ownership
// of the checkpoint storage of one of tasks, as their logs tell.
func (c *instances) takeovers(but *instance, tasks map[string]int32) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, in := range c.all {
		if in == but {
			continue
		}
		for _, line := range strings.Split(in.out.String(), "\n") {
			_, task, ok := strings.Cut(line, " task=")
			if !ok || !strings.Contains(line, "took ownership of the checkpoint storage") {
				continue
			}
			if _, ok := tasks[strings.Fields(task)[0]]; ok {
				n++
			}
		}
	}
	return n
}

// ended returns an instance that has ended although the test did not end it.
func (c *instances) ended() *instance {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, in := range c.all {
		if in.ends.Load() || in.zombie.Load() {
			continue
		}
		select {
		case err := <-in.done:
			in.done <- err
			return in
		default:
		}
	}
	return nil
}

func (c *instances) start(name string) *instance {
	c.t.Helper()
	// Without -race: the test judges the instances by the output they
	// commit (crashtesting.ChildBinary).
	cmd := exec.Command(crashtesting.ChildBinary(c.t), "-test.run=^TestClusterInstance$", "-test.v")
	cmd.Env = append(append(os.Environ(), c.env...), envInstance+"="+name, envState+"="+filepath.Join(c.state, name))
	buf := &testlog.Buffer{}
	cmd.Stdout, cmd.Stderr = buf, buf
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	in := &instance{name: name, cmd: cmd, out: buf, done: make(chan error, 1)}
	go func() { in.done <- cmd.Wait() }()
	c.mu.Lock()
	c.all = append(c.all, in)
	c.mu.Unlock()
	c.t.Logf("started instance %s (pid %d)", name, cmd.Process.Pid)
	return in
}

func (in *instance) signal(s syscall.Signal) { _ = in.cmd.Process.Signal(s) }

// wait waits for the process to end and fails the test if it failed.
func (in *instance) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case err := <-in.done:
		in.done <- err
		if err != nil {
			t.Errorf("instance %s: %v", in.name, err)
		}
	case <-time.After(timeout):
		t.Errorf("instance %s did not stop within %v", in.name, timeout)
	}
}

// stopAll stops the instances still running with SIGTERM and checks that
// each stopped cleanly (a killed one excepted).
func (c *instances) stopAll(t *testing.T) {
	for _, in := range c.all {
		in.signal(syscall.SIGTERM)
	}
	for _, in := range c.all {
		select {
		case err := <-in.done:
			in.done <- err
			fenced := in.zombie.Load() && strings.Contains(in.out.String(), "fenced")
			switch {
			case err != nil && fenced:
				t.Logf("instance %s stopped itself, fenced after its pause: %v", in.name, err)
			case err != nil && !strings.Contains(err.Error(), "signal: killed"):
				t.Errorf("instance %s: %v", in.name, err)
			}
		case <-time.After(time.Minute):
			t.Errorf("instance %s did not stop within a minute", in.name)
		}
	}
}

func (c *instances) killAll() {
	for _, in := range c.all {
		in.signal(syscall.SIGCONT)
		in.signal(syscall.SIGKILL)
	}
}

func (c *instances) dumpLogs() {
	for _, in := range c.all {
		c.t.Logf("--- instance %s ---\n%s", in.name, in.out.String())
	}
}

// createCountsTable creates ordinaryJob's table of running counts, dropped
// when t ends.
func createCountsTable(t *testing.T, table string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE TABLE "+table+" (key text NOT NULL, n bigint NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn, err := pgx.Connect(context.Background(), testenv.Postgres(t))
		if err == nil {
			_, err = conn.Exec(context.Background(), "DROP TABLE "+table)
			conn.Close(context.Background())
		}
		if err != nil {
			t.Logf("drop table %s: %v", table, err)
		}
	})
}

// checkCountsTable checks that ordinaryJob's table holds every running
// count "k:c" of the input exactly once, and nothing else: 1 to
// clusterPerKey, and one more for each key's record that ends the input.
func checkCountsTable(t *testing.T, table string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testenv.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, "SELECT key || ':' || n FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	got, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for k := range clusterKeys {
		want = append(want, counts(fmt.Sprintf("k%02d", k), clusterPerKey+1)...)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		seen := map[string]int{}
		for _, v := range got {
			seen[v]++
		}
		var wrong []string
		for _, v := range want {
			if seen[v] != 1 {
				wrong = append(wrong, fmt.Sprintf("%s seen %d times", v, seen[v]))
			}
		}
		t.Errorf("table %s: %d rows, want %d; %d counts not once: %s", table, len(got), len(want), len(wrong), strings.Join(wrong[:min(len(wrong), 10)], ", "))
	}
	t.Logf("table %s: all %d running counts once", table, len(want))
}
