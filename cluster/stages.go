package cluster

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/stages"
	"github.com/exactlyonce/exactly/stream"
)

// RunJob runs this instance of job j, an ordinary job written once, on a
// cluster of instances: the job is cut into stages at each key shuffle
// (KeyBy into a keyed operator, a window or a join), each cut a
// repartition topic that the engine creates; every stage runs as one task
// per partition of its input topics, and the group spreads the tasks of
// every stage over the instances. RunJob is StartJob followed by Wait.
//
// Every instance runs the same job with the same options. The job's
// sources must be Kafka sources (kafka.NewSource), which split by
// partition; Options.Group.Topics must be empty (the job's topics are
// the group's). See docs/scale-out.md.
func RunJob(ctx context.Context, j *stream.Job, opts Options) error {
	in, err := StartJob(ctx, j, opts)
	if err != nil {
		return err
	}
	return in.Wait()
}

// StartJob starts this instance of job j in the background, as RunJob
// does; Wait returns RunJob's result.
func StartJob(ctx context.Context, j *stream.Job, opts Options) (*Instance, error) {
	if j == nil {
		return nil, errors.New("cluster: RunJob: the job is nil")
	}
	if len(opts.Group.Topics) > 0 {
		return nil, fmt.Errorf("cluster: RunJob: Options.Group.Topics is %v: leave it empty, the group's topics are the job's input topics and its repartition topics", opts.Group.Topics)
	}
	planCtx, planned := context.WithTimeout(ctx, startTimeout(opts.Job))
	sp, err := planJob(planCtx, j, opts)
	planned()
	if err != nil {
		return nil, err
	}
	opts.Group.Topics = sp.leaders
	return start(ctx, j.Name(), opts, sp.build(j, opts), false, func(t Task) int { return slices.Index(sp.leaders, t.Topic) })
}

// jobStages is a job's stage plan, resolved against the cluster: the
// topics of each stage, its task count and the topic whose partitions
// name its tasks (its leader, which the group assigns).
type jobStages struct {
	plan           stages.Plan
	conn           kafka.Conn
	topics         [][]string // per stage: its sources' topics, then the cuts it reads
	tasks          []int32    // per stage: its number of tasks, the partitions of each of its topics
	leaders        []string   // per stage
	partitions     int32      // of every repartition topic
	maxParallelism int
}

// planJob plans j's stages, checks its sources, creates its repartition
// topics and checks that the topics of every stage are co-partitioned.
func planJob(ctx context.Context, j *stream.Job, opts Options) (*jobStages, error) {
	plan, err := stages.Hooks.Plan(j, opts.Job)
	if err != nil {
		return nil, err
	}
	sp := &jobStages{plan: plan, conn: opts.Group.Conn, topics: make([][]string, len(plan.Stages)), maxParallelism: plan.MaxParallelism}
	sources := j.Sources()
	var sourceTopics []string
	for s, st := range plan.Stages {
		for _, name := range st.Sources {
			pr, ok := sources[name].(partitionReader)
			if !ok {
				return nil, fmt.Errorf("cluster: source %q of job %q is a %T, which cannot be split by partition: a job run on a cluster reads Kafka topics (kafka.NewSource); run a job of file or generator sources in one process", name, j.Name(), sources[name])
			}
			topics, parts := pr.ReadsPartitions()
			if len(parts) > 0 || len(topics) == 0 {
				return nil, fmt.Errorf("cluster: source %q of job %q reads topics %v partitions %v: on a cluster, list its topics and no partitions (kafka.SourceOptions.Partitions empty), and the cluster gives each task its partition", name, j.Name(), topics, parts)
			}
			sp.topics[s] = append(sp.topics[s], topics...)
			sourceTopics = append(sourceTopics, topics...)
		}
	}
	counts, err := kafka.TopicPartitions(ctx, sp.conn, slices.Compact(slices.Sorted(slices.Values(sourceTopics))))
	if err != nil {
		return nil, fmt.Errorf("cluster: job %q: %w", j.Name(), err)
	}
	sp.partitions = opts.RepartitionPartitions
	if sp.partitions == 0 {
		for _, n := range counts {
			sp.partitions = max(sp.partitions, n)
		}
	}
	if int(sp.partitions) > sp.maxParallelism {
		return nil, fmt.Errorf("cluster: job %q: %d repartition partitions, more than the job's %d key groups (stream.Options.MaxParallelism): set Options.RepartitionPartitions to at most %d", j.Name(), sp.partitions, sp.maxParallelism, sp.maxParallelism)
	}
	if err := checkSharedSinks(j.Name(), plan, func(s int) int32 {
		if len(sp.topics[s]) > 0 {
			return counts[sp.topics[s][0]]
		}
		return sp.partitions
	}); err != nil {
		return nil, err
	}
	for _, c := range plan.Cuts {
		if err := kafka.EnsureTopic(ctx, sp.conn, c.Topic, sp.partitions); err != nil {
			return nil, fmt.Errorf("cluster: job %q: %w", j.Name(), err)
		}
		sp.topics[c.To] = append(sp.topics[c.To], c.Topic)
		counts[c.Topic] = sp.partitions
	}
	leaders := map[string]bool{}
	for s, topics := range sp.topics {
		n := counts[topics[0]]
		for _, t := range topics[1:] {
			if counts[t] != n {
				return nil, fmt.Errorf("cluster: job %q: stage %d reads topic %s of %d partitions and %s of %d: a task reads the same partition of each, so they must have as many partitions (co-partitioned); repartition the input, or give the topics equal counts", j.Name(), s, topics[0], n, t, counts[t])
			}
		}
		sp.tasks = append(sp.tasks, n)
		leader := ""
		for _, t := range topics {
			if !leaders[t] {
				leader = t
				break
			}
		}
		if leader == "" {
			return nil, fmt.Errorf("cluster: job %q: stage %d reads only topics %v, which other stages read too: read each input topic with one source", j.Name(), s, topics)
		}
		leaders[leader] = true
		sp.leaders = append(sp.leaders, leader)
	}
	return sp, nil
}

// sharedOutput is implemented by a sink that can tell whether the jobs of
// several tasks may share it: each task of a stage runs a job of its own
// name, and a sink that names its output without the job's name (a fixed
// Kafka transactional id prefix, a directory, a SQLite file) would have
// the tasks fence or overwrite each other. SharedByJobs returns why, or nil.
type sharedOutput interface{ SharedByJobs() error }

// checkSharedSinks refuses a sink of a stage that runs as more than one
// task (tasks gives a stage's count) when the sink cannot be shared.
func checkSharedSinks(job string, plan stages.Plan, tasks func(stage int) int32) error {
	for s, st := range plan.Stages {
		n := tasks(s)
		if n < 2 {
			continue
		}
		for _, sk := range st.Sinks {
			so, ok := sk.Sink.(sharedOutput)
			if !ok {
				continue
			}
			if err := so.SharedByJobs(); err != nil {
				return fmt.Errorf("cluster: job %q: sink %q runs in stage %d, as %d tasks, each a job of its own: %w", job, sk.Name, s, n, err)
			}
		}
	}
	return nil
}

// build returns the Build of the tasks of every stage: a task is a
// partition of its stage's leader topic.
func (sp *jobStages) build(j *stream.Job, opts Options) Build {
	return func(name string, t Task) (*stream.Job, error) {
		s := slices.Index(sp.leaders, t.Topic)
		if s < 0 {
			return nil, fmt.Errorf("cluster: task %s is of no stage of job %q (its topics are %v)", t, j.Name(), sp.leaders)
		}
		sj, err := stages.Hooks.StageJob(j, opts.Job, name, s, sp.io(t.Partition, opts))
		if err != nil {
			return nil, err
		}
		return sj.(*stream.Job), nil
	}
}

// io returns how the task of partition p reads and writes its cuts and
// reads its sources.
func (sp *jobStages) io(p int32, opts Options) stages.IO {
	return stages.IO{
		Read: func(job any, c stages.Cut) (any, error) {
			o := kafka.SourceOptions{Conn: sp.conn, Topics: []string{c.Topic}, Partitions: []int32{p}}
			if sp.plan.EventTime {
				o.Upstreams = int(sp.tasks[c.From])
			}
			src, err := kafka.NewSource(o, kafka.Bytes())
			if err != nil {
				return nil, err
			}
			sj := job.(*stream.Job)
			var recs stream.Stream[kafka.Record[[]byte]]
			if sp.plan.EventTime {
				recs = stream.SourceWithEventTime(sj, c.Topic+".read", src, stream.EventTime[kafka.Record[[]byte]]{
					Timestamp: func(r kafka.Record[[]byte]) time.Time { return r.Timestamp },
				})
			} else {
				recs = stream.Source(sj, c.Topic+".read", src)
			}
			return stream.Map(recs, func(r kafka.Record[[]byte]) []byte { return r.Value }, stream.Name(c.Topic+".values")), nil
		},
		Write: func(envelopes any, c stages.Cut) error {
			// ReproduceAborted: a cut's records survive an outage longer
			// than the transaction timeout between a checkpoint's
			// completion and its commit (within the topic's retention).
			snk, err := kafka.NewSink(kafka.SinkOptions{Conn: sp.conn, Topic: c.Topic, ManualPartitions: true, Watermarks: sp.plan.EventTime,
				ReproduceAborted: true},
				func(e stages.Envelope) (kafka.Message, error) {
					return kafka.Message{Value: e.Value, Partition: int32(stages.Partition(e.KeyGroup, sp.maxParallelism, int(sp.partitions)))}, nil
				})
			if err != nil {
				return err
			}
			stream.SinkTo(envelopes.(stream.Stream[stages.Envelope]), c.Topic+".write", snk)
			return nil
		},
		Source: func(name string, src any) (any, error) {
			m := reflect.ValueOf(src).MethodByName("ForPartition")
			if !m.IsValid() {
				return nil, fmt.Errorf("cluster: source %q is a %T, which cannot be split by partition", name, src)
			}
			out := m.Call([]reflect.Value{reflect.ValueOf(p), reflect.ValueOf(0)})
			if err, _ := out[1].Interface().(error); err != nil {
				return nil, fmt.Errorf("cluster: source %q: %w", name, err)
			}
			return out[0].Interface(), nil
		},
	}
}
