package torture

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/connectors/kafka"
)

// completionBound bounds the wait, after the last fault, for the cluster
// to commit the whole output.
const completionBound = 10 * time.Minute

// runCluster is Run for a cluster run (Config.Instances): it starts the
// instances, makes instance faults and service faults until enough were
// made, lets the cluster commit the whole output, stops every instance
// cleanly and checks every sink.
func runCluster(ctx context.Context, c Config, jc jobConfig, in *injector, cfgJSON []byte, command func(context.Context) *exec.Cmd, began time.Time, logf func(string, ...any)) (*Report, error) {
	in.instances = true
	f := &fleet{size: c.Instances, env: []string{envJob + "=" + string(cfgJSON)}, command: command,
		dir: filepath.Join(c.Dir, "instances"), in: in, logf: logf}
	defer f.kill()
	rep := &Report{Seed: c.Seed, Events: c.Events, Keys: c.Keys, Faults: map[string]int{}, Outcomes: in.outcomes, Instances: c.Instances}
	finish := func(err error) (*Report, error) {
		rep.Runs = f.started
		in.mu.Lock()
		for k, n := range in.counts {
			rep.Faults[k] += n
		}
		in.mu.Unlock()
		if progress, perr := os.ReadFile(jc.Progress); perr == nil {
			rep.Checkpoints = strings.Count(string(progress), "c")
		}
		rep.Duration = time.Since(began)
		return rep, err
	}
	logf("torture: seed %d: a cluster of %d instances runs job %s (group %s): %d events, %d keys, at least %d faults",
		c.Seed, c.Instances, jc.Job, jc.Group, c.Events, c.Keys, c.Faults)
	if err := f.fill(ctx); err != nil {
		return finish(err)
	}
	if err := waitForCheckpoint(ctx, jc.Progress, f); err != nil {
		return finish(err)
	}
	in.enough = func() bool {
		if c.Duration > 0 && time.Since(began) > c.Duration {
			return true
		}
		return in.total.Load() >= int64(c.Faults) && in.covered()
	}
	rng := rand.New(rand.NewPCG(c.Seed, 0x1457))
	kinds := instanceKinds()
	for step := 0; !in.enough() && ctx.Err() == nil; step++ {
		if err := f.unexpected(); err != nil {
			in.fail(err)
			break
		}
		if !sleep(ctx, time.Second+time.Duration(rng.Int64N(int64(3*time.Second)))) {
			break
		}
		var kind string
		var err error
		switch made := int(in.total.Load() - in.ordinary.Load()); {
		case len(in.groups) > 0 && (step%2 == 1 && int(in.ordinary.Load()) < len(flat(in.kinds())) || made >= len(kinds) && rng.IntN(3) == 0):
			kind, err = in.inject(ctx, rng)
			in.ordinary.Add(1)
		default:
			kind = kinds[rng.IntN(len(kinds))]
			if made < len(kinds) {
				kind = kinds[made]
			}
			if err = f.fault(ctx, rng, kind); err != nil {
				err = fmt.Errorf("%s: %w", kind, err)
			}
		}
		in.mu.Lock()
		in.counts[kind]++
		in.mu.Unlock()
		in.total.Add(1)
		logf("fault %d: %s done (%d instances run)", in.total.Load(), kind, f.count())
		if err != nil {
			in.fail(err)
			break
		}
	}
	rep.Incomplete = true
	err := errors.Join(in.heal(), in.servicesUp())
	if werr := os.WriteFile(jc.Unthrottle, nil, 0o644); werr != nil {
		err = errors.Join(err, werr)
	}
	if err == nil && in.err == nil {
		err = f.fill(ctx)
	}
	if err == nil && in.err == nil {
		err = waitForOutput(ctx, c, jc, f, logf)
		rep.Incomplete = err != nil
	}
	err = errors.Join(err, f.shutdown())
	if parked := f.parked(); len(parked) > 0 {
		err = errors.Join(err, fmt.Errorf("torture: %d tasks were parked (failed):\n%s", len(parked), strings.Join(parked, "\n")))
	}
	err = errors.Join(err, in.err)
	o, oerr := clusterOwnersOf(ctx, c.Kafka, jc)
	if oerr != nil {
		return finish(errors.Join(err, oerr))
	}
	if err != nil {
		rep.Failure = err.Error()
	}
	if cerr := checkSinks(ctx, c, jc, o, rep, logf); cerr != nil {
		err = errors.Join(err, cerr)
	}
	if err != nil {
		err = fmt.Errorf("torture: seed %d: %w", c.Seed, err)
	}
	return finish(err)
}

// flat returns the kinds of every group.
func flat(groups [][]string) []string {
	var all []string
	for _, g := range groups {
		all = append(all, g...)
	}
	return all
}

// waitForCheckpoint waits for the cluster's first completed checkpoint.
func waitForCheckpoint(ctx context.Context, progress string, f *fleet) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if b, _ := os.ReadFile(progress); strings.Contains(string(b), "c") {
			return nil
		}
		if err := f.unexpected(); err != nil {
			return err
		}
		if !sleep(ctx, 200*time.Millisecond) {
			return ctx.Err()
		}
	}
	return errors.New("torture: the cluster completed no checkpoint within 2 minutes of its start")
}

// waitForOutput waits until every sink holds as many committed records as
// the workload makes (the checker then tells whether they are the right
// ones), failing when an instance exits on its own or completionBound
// passes.
func waitForOutput(ctx context.Context, c Config, jc jobConfig, f *fleet, logf func(string, ...any)) error {
	windows := len(NewExpected(c.Workload).windows)
	var outs, wins atomic.Int64
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	count := func(topic string, n *atomic.Int64) error {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.Kafka), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()))
		if err != nil {
			return err
		}
		go func() {
			defer cl.Close()
			for cctx.Err() == nil {
				n.Add(int64(cl.PollFetches(cctx).NumRecords()))
			}
		}()
		return nil
	}
	if err := errors.Join(count(jc.Output, &outs), count(jc.Windows, &wins)); err != nil {
		return err
	}
	deadline := time.Now().Add(completionBound)
	last := ""
	for {
		var rows [2]int
		var rowsErr error
		for i, t := range []string{jc.Fenced, jc.Prepared} {
			var err error
			rows[i], err = tableRows(ctx, c.Postgres, t)
			rowsErr = errors.Join(rowsErr, err)
		}
		state := fmt.Sprintf("Kafka %d/%d, PostgreSQL fenced %d/%d and prepared %d/%d, windows %d/%d",
			outs.Load(), c.Events, rows[0], c.Events, rows[1], c.Events, wins.Load(), windows)
		if state != last {
			logf("torture: committed so far: %s", state)
			last = state
		}
		if rowsErr == nil && outs.Load() >= int64(c.Events) && rows[0] >= c.Events && rows[1] >= c.Events && wins.Load() >= int64(windows) {
			return nil
		}
		if err := f.unexpected(); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("torture: the cluster did not commit the whole output within %v of the last fault: %s", completionBound, state)
		}
		if !sleep(ctx, 2*time.Second) {
			return ctx.Err()
		}
	}
}

// tableRows counts the rows of table.
func tableRows(ctx context.Context, dsn, table string) (int, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, "SELECT count(*) FROM "+pgx.Identifier{table}.Sanitize()).Scan(&n)
	return n, err
}

// clusterOwnersOf is clusterOwners through a client of brokers of its own.
func clusterOwnersOf(ctx context.Context, brokers string, jc jobConfig) (sinkOwners, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		return sinkOwners{}, err
	}
	defer cl.Close()
	return clusterOwners(ctx, kadm.NewClient(cl), jc)
}

// clusterOwners lists the tasks of a cluster run (one per partition of its
// input topic and of each of its repartition topics, each a job named
// "<job>.<topic>.<partition>") and returns what their sinks leave behind.
func clusterOwners(ctx context.Context, adm *kadm.Client, jc jobConfig) (sinkOwners, error) {
	var o sinkOwners
	topics, err := adm.ListTopics(ctx)
	if err != nil {
		return o, fmt.Errorf("torture: list the topics: %w", err)
	}
	for _, t := range topics.Sorted() {
		repartition := strings.HasPrefix(t.Topic, jc.Job+"-") && strings.HasSuffix(t.Topic, "-repartition")
		if repartition {
			o.repartition = append(o.repartition, t.Topic)
		}
		if !repartition && t.Topic != jc.Input {
			continue
		}
		for p := range t.Partitions {
			task := jc.Job + "." + t.Topic + "." + strconv.Itoa(int(p))
			o.jobs = append(o.jobs, task)
			o.kafka = append(o.kafka, kafka.DefaultTransactionalIDPrefix(task, sinkKafka))
			o.windows = append(o.windows, kafka.DefaultTransactionalIDPrefix(task, sinkWindows))
		}
	}
	return o, nil
}
