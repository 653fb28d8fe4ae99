package torture

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/internal/crashtest"
)

// Config configures a torture run.
type Config struct {
	// Workload is the input; its Seed also seeds the fault schedule.
	Workload
	// Faults is the least number of faults to inject (SIGKILLs included).
	Faults int
	// Duration stops injecting faults after this long (0: no limit); the
	// job then finishes without faults.
	Duration time.Duration
	// Kafka is the broker's address (host:port), reached directly by the
	// loader and the checker; the job goes through toxiproxy.
	Kafka string
	// Postgres is the database's URL DSN.
	Postgres string
	// Toxiproxy is the address of toxiproxy's API; empty disables the
	// network faults (the job then connects directly).
	Toxiproxy string
	// KafkaProxyPort is where toxiproxy listens for the broker: the
	// broker's extra listener (scripts/kafka.sh, KAFKA_PROXY_PORT)
	// advertises it. Default: the broker's port + 3; the listener itself
	// is on the broker's port + 2.
	KafkaProxyPort int
	// PostgresProxyPort is where toxiproxy listens for PostgreSQL.
	// Default: the database's port + 10.
	PostgresProxyPort int
	// Scripts is the directory of kafka.sh and postgres.sh, which restart
	// the services (with the environment of this process: KAFKA_DIR,
	// EXACTLY_POSTGRES_DATA ... must name the same services). Default: the
	// scripts directory of the repository holding the working directory.
	Scripts string
	// Dir holds the checkpoints, the file sink's output and the report.
	Dir string
	// Rate is the job's throughput limit in events per second, so that
	// the faults hit a running job (0: no limit).
	Rate float64
	// Interval is the checkpoint interval. Default 300ms.
	Interval time.Duration
	// NoDisk disables the checkpoint directory faults (they need root).
	NoDisk bool
	// S3 is the endpoint of the S3 server (scripts/s3.sh, such as
	// http://127.0.0.1:27070): when set, the job keeps its checkpoints
	// there, through toxiproxy, and the object-storage faults replace the
	// checkpoint directory faults. Its credentials come from the standard
	// AWS environment variables.
	S3 string
	// Pebble keeps the job's keyed state in the Pebble backend, under Dir,
	// instead of on the heap.
	Pebble bool
	// Instances, when above 0, runs the job as a cluster job
	// (cluster.RunJob, stages joined by repartition topics) on this many
	// instance processes, and makes the instance faults (FaultInstanceKill
	// ...) with the service and network faults instead of the
	// single-process ones. The job then has no file sink (see jobConfig).
	Instances int
	// Logf receives progress; nil discards it.
	Logf func(format string, args ...any)
}

// Report is the outcome of a torture run.
type Report struct {
	// Seed replays the run's input and fault schedule.
	Seed uint64
	// Events and Keys describe the workload.
	Events, Keys int
	// Faults counts the faults injected by kind.
	Faults map[string]int
	// Runs counts the job processes started; every one after the first
	// recovered from the previous one's checkpoint. In a cluster run it
	// counts the instance processes started.
	Runs int
	// Instances is Config.Instances.
	Instances int
	// Failovers counts restarts of the job inside a process after an error.
	Failovers int
	// Checkpoints counts the checkpoints completed.
	Checkpoints int
	// Windows counts the event-time windows (per key) the workload fills:
	// the records a windowed sink must hold.
	Windows int
	// Outcomes counts what the process faults (a clean stop, a second
	// instance, a zombie, a corrupt checkpoint) saw the engine do, by
	// outcome; an outcome that breaks a rule fails the run instead.
	Outcomes map[string]int
	// Sinks is the checker's verdict per sink.
	Sinks []SinkResult
	// Failure is why the run failed besides the sinks' anomalies (a rule
	// broken, a fault that could not be made or healed); "" when it did not.
	Failure string
	// Incomplete is set when a cluster run stopped before the cluster had
	// committed its whole input: its sinks were checked all the same, and
	// their missing records are expected (their duplicates, aborted records
	// made visible and lingering transactions are not).
	Incomplete bool
	// Duration is the run's wall time.
	Duration time.Duration
}

// TotalFaults sums Faults.
func (r *Report) TotalFaults() int {
	n := 0
	for _, c := range r.Faults {
		n += c
	}
	return n
}

// Anomalies sums the anomalies of every sink.
func (r *Report) Anomalies() int {
	n := 0
	for _, s := range r.Sinks {
		n += s.Anomalies()
	}
	return n
}

// Print writes the report.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "torture report: seed %d, %d events over %d keys, %v\n", r.Seed, r.Events, r.Keys, r.Duration.Round(time.Second))
	fmt.Fprintf(w, "faults injected: %d\n", r.TotalFaults())
	for _, k := range slices.Sorted(maps.Keys(r.Faults)) {
		fmt.Fprintf(w, "  %-36s %d\n", k, r.Faults[k])
	}
	if len(r.Outcomes) > 0 {
		fmt.Fprintf(w, "process fault outcomes:\n")
		for _, k := range slices.Sorted(maps.Keys(r.Outcomes)) {
			fmt.Fprintf(w, "  %-86s %d\n", k, r.Outcomes[k])
		}
	}
	if r.Instances > 0 {
		fmt.Fprintf(w, "instance processes started: %d (%d at the start, then the restarts, replacements and joins)\n", r.Runs, r.Instances)
	} else {
		fmt.Fprintf(w, "recoveries: %d job process restarts from a checkpoint, %d failovers inside a process\n", r.Runs-1, r.Failovers)
	}
	fmt.Fprintf(w, "checkpoints completed: %d\n", r.Checkpoints)
	verified, sinks := map[string]int{}, map[string]int{}
	for _, s := range r.Sinks {
		verified[s.unit()] += s.Verified
		sinks[s.unit()]++
		fmt.Fprintf(w, "  %s\n", s)
		for _, e := range s.Examples {
			fmt.Fprintf(w, "      %s\n", e)
		}
	}
	fmt.Fprintf(w, "events verified: %d (%d sinks × %d events)\n", verified[unitEvents], sinks[unitEvents], r.Events)
	if n := sinks[unitWindows]; n > 0 {
		fmt.Fprintf(w, "windows verified: %d of %d\n", verified[unitWindows], n*r.Windows)
	}
	if len(r.Sinks) == 0 {
		fmt.Fprintf(w, "sinks not checked: the run failed before the check — FAIL\n")
		return
	}
	verdict := "PASS"
	if r.Anomalies() > 0 || r.Failure != "" {
		verdict = "FAIL"
	}
	if r.Failure != "" {
		fmt.Fprintf(w, "the run failed, the sinks were checked all the same: %s\n", r.Failure)
	}
	if r.Incomplete {
		fmt.Fprintf(w, "the run stopped before the cluster committed its whole input: the missing records are expected, the other anomalies are not\n")
	}
	fmt.Fprintf(w, "anomalies: %d — %s\n", r.Anomalies(), verdict)
}

// Run loads the workload into Kafka, runs the job in child processes made
// by command (which must run [RunChild] when [IsChild]) under crashtest
// and the fault injector until at least c.Faults faults were injected and
// the job finished, then checks every sink.
func Run(ctx context.Context, c Config, command func(context.Context) *exec.Cmd) (*Report, error) {
	began := time.Now()
	logf := c.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	if c.Interval == 0 {
		c.Interval = 300 * time.Millisecond
	}
	if c.Events <= 0 || c.Keys <= 0 || c.Faults < 0 || c.Kafka == "" || c.Postgres == "" || c.Dir == "" {
		return nil, fmt.Errorf("torture: need events > 0 (%d), keys > 0 (%d), faults >= 0 (%d), the Kafka (%q) and PostgreSQL addresses and a directory (%q)",
			c.Events, c.Keys, c.Faults, c.Kafka, c.Dir)
	}
	if c.Scripts == "" {
		var err error
		if c.Scripts, err = findScripts(); err != nil {
			return nil, err
		}
	}
	name := fmt.Sprintf("torture_%d_%d", c.Seed, time.Now().UnixNano())
	jc := jobConfig{
		Brokers: c.Kafka, DSN: c.Postgres,
		Input: name + "-in", Output: name + "-out", TxnPrefix: name,
		// WindowsTxn must not start with TxnPrefix + "-": the checker
		// counts the transactions under that as the first Kafka sink's.
		Windows: name + "-windows", WindowsTxn: name + "_windows",
		Fenced: name + "_fenced", Prepared: name + "_prepared",
		Files: filepath.Join(c.Dir, "files"), Progress: filepath.Join(c.Dir, "progress"),
		Rate: c.Rate, Interval: c.Interval,
	}
	if c.Pebble {
		jc.StateDir = filepath.Join(c.Dir, "pebble")
	}
	if c.Instances > 0 {
		// Run-unique: the repartition topics are named after the job.
		jc.Cluster, jc.Job, jc.Group = true, name, name+"-group"
		jc.Unthrottle = filepath.Join(c.Dir, "unthrottle")
	}
	if err := os.MkdirAll(c.Dir, 0o755); err != nil {
		return nil, err
	}
	in, cleanup, err := setupFaults(ctx, c, &jc, logf)
	defer func() {
		if err := cleanup(); err != nil {
			logf("torture: cleanup: %v", err)
		}
	}()
	if err != nil {
		return nil, err
	}
	// The run deletes what it creates, whatever the outcome (after the
	// check: the report holds what a failure needs).
	defer func() {
		if err := errors.Join(dropRun(c, jc), in.removeObjectStorage()); err != nil {
			logf("torture: deleting the run's topics and tables: %v", err)
		}
	}()
	if err := load(ctx, c, jc); err != nil {
		return nil, err
	}
	for _, t := range []string{jc.Fenced, jc.Prepared} {
		if err := createTable(ctx, c.Postgres, t); err != nil {
			return nil, err
		}
	}
	cfgJSON, err := json.Marshal(jc)
	if err != nil {
		return nil, err
	}
	// The final run, once every fault is made, reads the input left
	// unthrottled: at the throttle's rate a long run's rest could take
	// longer than its faults did.
	unthrottled := jc
	unthrottled.Rate = 0
	finalJSON, err := json.Marshal(unthrottled)
	if err != nil {
		return nil, err
	}

	if c.Instances > 0 {
		return runCluster(ctx, c, jc, in, cfgJSON, command, began, logf)
	}
	var kills atomic.Int64
	var stall stallCounter
	// Enough once the budget is spent and every fault kind was made once
	// (kills dominate the budget; without the second condition a run could
	// end before the scheduler's first round reached every kind).
	enough := func() bool {
		if c.Duration > 0 && time.Since(began) > c.Duration {
			return true
		}
		return kills.Load()+in.total.Load() >= int64(c.Faults) && in.covered()
	}
	in.enough = enough
	in.progress, in.job, in.pg = jc.Progress, jc, c.Postgres
	logf("torture: seed %d: %d events, %d keys, at least %d faults, topics %s → %s and %s, tables %s and %s, files in %s",
		c.Seed, c.Events, c.Keys, c.Faults, jc.Input, jc.Output, jc.Windows, jc.Fenced, jc.Prepared, jc.Files)
	crep, err := crashtest.Supervise(crashtest.Options{
		Kills: 1, Seed: c.Seed, MaxDelay: 6 * time.Second, Timeout: 30 * time.Minute,
		Env:      []string{envJob + "=" + string(cfgJSON)},
		FinalEnv: []string{envJob + "=" + string(finalJSON)},
		More: func(k int, finished bool) bool {
			kills.Store(int64(k))
			more := !enough()
			switch {
			case in.failed():
				// A fault could not be made, or a rule broke: the run ends
				// with the final run and reports it; going on would bury it
				// (a CI run went on for 12,792 runs of a finished job).
				more = false
			case stall.stalled(in.checkpoints()):
				// Runs killed at a protocol point of the restore never let a
				// finished job say so: a long stretch of runs without a new
				// checkpoint means the job finished (or is stuck).
				in.failf("torture: no checkpoint completed in the last %d runs: the job finished its input or is stuck before a fault of every kind was made (missing: %s): raise --events or lower --rate",
					stalledRuns, strings.Join(in.missing(), ", "))
				more = false
			case !finished || !more:
			case !in.covered():
				// A finished job's runs last milliseconds: the faults left
				// would never be made.
				in.failf("torture: the job finished its input before a fault of every kind was made (missing: %s): raise --events or lower --rate",
					strings.Join(in.missing(), ", "))
				more = false
			default:
				in.failf("torture: the job finished its input after %d of the %d faults asked for: raise --events or lower --rate",
					int64(k)+in.total.Load(), c.Faults)
				more = false
			}
			return more
		},
		During: in.during,
		Claim:  in.claim,
	}, command, logf)
	rep := &Report{Seed: c.Seed, Events: c.Events, Keys: c.Keys, Runs: crep.Runs, Faults: map[string]int{}, Outcomes: in.outcomes}
	for k, n := range crep.ByKind {
		rep.Faults["kill:"+k] = n
	}
	for k, n := range in.counts {
		rep.Faults[k] += n
	}
	if progress, perr := os.ReadFile(jc.Progress); perr == nil {
		rep.Checkpoints = strings.Count(string(progress), "c")
		rep.Failovers = strings.Count(string(progress), "r")
	}
	finished := err == nil
	err = errors.Join(err, in.err, in.heal())
	if err != nil {
		err = fmt.Errorf("torture: seed %d: %w", c.Seed, err)
		// A job that finished its input is checked even when a rule broke
		// or a fault failed (a service restart that did not come back in
		// time): the sinks tell whether exactly-once held, and the run's
		// data is deleted afterwards. The services are started first.
		if finished && in.servicesUp() == nil {
			rep.Failure = err.Error()
			if cerr := checkSinks(ctx, c, jc, singleOwners(jc), rep, logf); cerr != nil {
				err = errors.Join(err, cerr)
			}
		}
		return rep, err
	}
	if err := checkSinks(ctx, c, jc, singleOwners(jc), rep, logf); err != nil {
		return rep, err
	}
	rep.Duration = time.Since(began)
	return rep, nil
}

// sinkOwners names what the run's sinks leave behind: the transactional
// id prefixes of its Kafka sinks and the job names its PostgreSQL sinks
// key their staging tables and prepared transactions by.
type sinkOwners struct {
	kafka, windows []string
	jobs           []string
	// repartition lists a cluster run's repartition topics.
	repartition []string
}

// singleOwners returns the owners of a run in one process.
func singleOwners(jc jobConfig) sinkOwners {
	return sinkOwners{kafka: []string{jc.TxnPrefix}, windows: []string{jc.WindowsTxn}, jobs: []string{jobName}}
}

// checkSinks checks every sink of the finished job against the expected
// output and records the verdicts in rep.
func checkSinks(ctx context.Context, c Config, jc jobConfig, o sinkOwners, rep *Report, logf func(string, ...any)) error {
	x := NewExpected(c.Workload)
	logf("torture: job finished; checking the sinks")
	rep.Windows = len(x.windows)
	res, err := CheckKafka(ctx, x, sinkKafka, c.Kafka, jc.Output, o.kafka)
	if err != nil {
		return fmt.Errorf("torture: checking Kafka: %w", err)
	}
	rep.Sinks = append(rep.Sinks, res)
	for _, s := range []struct{ name, table string }{{sinkFenced, jc.Fenced}, {sinkPrepared, jc.Prepared}} {
		res, err := CheckPostgres(ctx, x, "postgres "+strings.TrimPrefix(s.name, "pg-"), c.Postgres, s.table, o.jobs, s.name)
		if err != nil {
			return fmt.Errorf("torture: checking PostgreSQL table %s: %w", s.table, err)
		}
		rep.Sinks = append(rep.Sinks, res)
	}
	if !jc.Cluster {
		if res, err = CheckFiles(x, sinkFiles, jc.Files); err != nil {
			return fmt.Errorf("torture: checking files: %w", err)
		}
		rep.Sinks = append(rep.Sinks, res)
	}
	if res, err = CheckKafkaWindows(ctx, x, sinkWindows, c.Kafka, jc.Windows, o.windows); err != nil {
		return fmt.Errorf("torture: checking the windowed Kafka topic: %w", err)
	}
	rep.Sinks = append(rep.Sinks, res)
	return nil
}

// setupFaults prepares the fault injector: the toxiproxy proxies (and the
// broker's proxy listener), the checkpoint directory on a small tmpfs.
// It points jc at the proxies and the checkpoint directory. cleanup
// undoes what was set up.
func setupFaults(ctx context.Context, c Config, jc *jobConfig, logf func(string, ...any)) (in *injector, cleanup func() error, err error) {
	var undo []func() error
	cleanup = func() error {
		var errs []error
		for _, f := range slices.Backward(undo) {
			errs = append(errs, f())
		}
		return errors.Join(errs...)
	}
	in = &injector{seed: c.Seed, scripts: c.Scripts, kafka: c.Kafka, logf: logf, counts: map[string]int{},
		outcomes: map[string]int{}, claimed: map[int]string{},
		groups: []string{groupKafka, groupPostgres}}
	_, kport, err := net.SplitHostPort(c.Kafka)
	if err != nil {
		return in, cleanup, fmt.Errorf("torture: Kafka address %q: %w", c.Kafka, err)
	}
	kp, _ := strconv.Atoi(kport)
	in.kafkaEnv = []string{"KAFKA_PORT=" + kport}

	if c.Toxiproxy != "" {
		in.tp = newToxiproxy(c.Toxiproxy)
		if c.KafkaProxyPort == 0 {
			c.KafkaProxyPort = kp + 3
		}
		listener := fmt.Sprintf("127.0.0.1:%d", kp+2)
		in.kafkaEnv = append(in.kafkaEnv, "KAFKA_PROXY_PORT="+strconv.Itoa(c.KafkaProxyPort), "KAFKA_PROXY_LISTENER_PORT="+strconv.Itoa(kp+2))
		if !listening(listener) {
			logf("torture: the broker has no proxy listener on %s: restarting it with one (scripts/kafka.sh, KAFKA_PROXY_PORT=%d)", listener, c.KafkaProxyPort)
			if err := in.script(in.kafkaEnv, "kafka.sh", "restart"); err != nil {
				return in, cleanup, err
			}
		}
		u, err := url.Parse(c.Postgres)
		if err != nil || u.Scheme == "" {
			return in, cleanup, fmt.Errorf("torture: the PostgreSQL DSN must be a URL (postgres://...) to be routed through toxiproxy")
		}
		pp, _ := strconv.Atoi(u.Port())
		if c.PostgresProxyPort == 0 {
			c.PostgresProxyPort = pp + 10
		}
		kproxy := fmt.Sprintf("127.0.0.1:%d", c.KafkaProxyPort)
		pproxy := fmt.Sprintf("127.0.0.1:%d", c.PostgresProxyPort)
		if err := errors.Join(in.tp.proxy(ctx, "kafka", kproxy, listener), in.tp.proxy(ctx, "postgres", pproxy, u.Host)); err != nil {
			return in, cleanup, err
		}
		undo = append(undo, func() error {
			return errors.Join(in.tp.remove(context.Background(), "kafka"), in.tp.remove(context.Background(), "postgres"))
		})
		jc.Brokers = kproxy
		u.Host = pproxy
		jc.DSN = u.String()
		in.groups = append(in.groups, groupNetwork)
	}

	if c.S3 != "" {
		u, err := in.setupObjectStorage(ctx, c.S3, jc.TxnPrefix, jc)
		if err != nil {
			return in, cleanup, err
		}
		undo = append(undo, u)
		return in, cleanup, nil
	}
	ckfs := filepath.Join(c.Dir, "ckfs")
	if err := os.MkdirAll(ckfs, 0o755); err != nil {
		return in, cleanup, err
	}
	in.ckpt = filepath.Join(ckfs, "checkpoints")
	jc.Checkpoints = in.ckpt
	if !c.NoDisk {
		if os.Geteuid() != 0 {
			return in, cleanup, errors.New("torture: the checkpoint directory faults need root (chattr +i, a tmpfs mount): run as root or disable them")
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", ckfs).CombinedOutput(); err != nil {
			logf("torture: cannot mount a tmpfs on %s (%v: %s): no checkpoint-full faults", ckfs, err, strings.TrimSpace(string(out)))
		} else {
			in.ckfs = ckfs
			undo = append(undo, func() error { return exec.Command("umount", ckfs).Run() })
		}
		in.groups = append(in.groups, groupDisk)
	}
	return in, cleanup, os.MkdirAll(in.ckpt, 0o755)
}

// load creates the topics and writes the workload into the input topic,
// each event keyed by its key and stamped with its event time. The input
// and the windowed output hold records stamped in event time, long past:
// those topics keep records forever (retention.ms=-1), or the broker's
// time retention would delete them.
func load(ctx context.Context, c Config, jc jobConfig) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Kafka), kgo.DefaultProduceTopic(jc.Input), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	// CreateTime: the records keep the loader's and the sink's timestamps.
	forever := map[string]*string{"retention.ms": kadm.StringPtr("-1"), "message.timestamp.type": kadm.StringPtr("CreateTime")}
	for _, t := range []struct {
		name    string
		parts   int32
		configs map[string]*string
	}{{jc.Input, inputPartitions, forever}, {jc.Output, outputPartitions, nil}, {jc.Windows, outputPartitions, forever}} {
		resp, err := adm.CreateTopic(ctx, t.parts, 1, t.configs, t.name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("torture: create topic %s: %w", t.name, err)
		}
	}
	evs := c.Generate()
	recs := make([]*kgo.Record, len(evs))
	for i, e := range evs {
		recs[i] = &kgo.Record{Key: []byte(e.Key), Value: appendEvent(nil, e), Timestamp: e.Time()}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("torture: load the input: %w", err)
	}
	if jc.Cluster {
		return endInput(ctx, c.Kafka, jc.Input, evs)
	}
	return nil
}

// endInput ends each partition of the input topic of a cluster run, whose
// job reads it unbounded, with an end marker stamped an hour after the
// last event: the watermark it brings closes every window.
func endInput(ctx context.Context, brokers, topic string, evs []Event) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		return err
	}
	defer cl.Close()
	var last time.Time
	for _, e := range evs {
		if e.Time().After(last) {
			last = e.Time()
		}
	}
	var recs []*kgo.Record
	for p := range int32(inputPartitions) {
		recs = append(recs, &kgo.Record{Partition: p, Value: []byte(endMarker), Timestamp: last.Add(time.Hour)})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("torture: end the input: %w", err)
	}
	return nil
}

// dropRun deletes the topics, the tables (and the sinks' progress rows
// of this run's tables) that the run created.
func dropRun(c Config, jc jobConfig) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.Kafka))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	topics := []string{jc.Input, jc.Output, jc.Windows}
	jobs := []string{jobName}
	if jc.Cluster {
		o, err := clusterOwners(ctx, adm, jc)
		errs = append(errs, err)
		topics, jobs = append(topics, o.repartition...), o.jobs
		errs = append(errs, deleteGroup(ctx, adm, jc.Group))
	}
	resp, err := adm.DeleteTopics(ctx, topics...)
	errs = append(errs, err)
	for _, r := range resp {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			errs = append(errs, fmt.Errorf("delete topic %s: %w", r.Topic, r.Err))
		}
	}
	errs = append(errs, dropTables(ctx, c.Postgres, jobs, jc.Fenced, jc.Prepared))
	return errors.Join(errs...)
}

// deleteGroup deletes a cluster run's consumer group, waiting (up to a
// minute, the ctx of dropRun) for the members of killed instances to
// expire: the broker refuses to delete a group that has members.
func deleteGroup(ctx context.Context, adm *kadm.Client, group string) error {
	for {
		_, err := adm.DeleteGroup(ctx, group)
		switch {
		case err == nil || errors.Is(err, kerr.GroupIDNotFound):
			return nil
		case !errors.Is(err, kerr.NonEmptyGroup):
			return fmt.Errorf("delete group %s: %w", group, err)
		}
		if !sleep(ctx, time.Second) {
			return fmt.Errorf("delete group %s: %w", group, err)
		}
	}
}

// findScripts returns the scripts directory of the repository holding the
// working directory.
func findScripts() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "scripts", "kafka.sh")); err == nil {
			return filepath.Join(dir, "scripts"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("torture: no scripts/kafka.sh in the working directory or above: pass the scripts directory")
		}
		dir = parent
	}
}

// stalledRuns is how many runs in a row without a new checkpoint end a
// torture run: the job finished its input, or is stuck. A healthy run's
// runs killed before their first checkpoint come a few in a row at most.
const stalledRuns = 30

// stallCounter counts the runs since the job's checkpoints last grew.
type stallCounter struct{ checkpoints, runs int }

// stalled notes the checkpoints completed before a run and reports whether
// stalledRuns runs in a row completed none.
func (s *stallCounter) stalled(checkpoints int) bool {
	if checkpoints != s.checkpoints {
		s.checkpoints, s.runs = checkpoints, 0
		return false
	}
	s.runs++
	return s.runs > stalledRuns
}
