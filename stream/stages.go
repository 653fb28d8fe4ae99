package stream

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"

	"github.com/exactlyonce/exactly/internal/runtime"
)

// This file cuts a job's graph into stages, the first step of running an
// ordinary job on many instances (issue 29): each key shuffle (a hash edge:
// KeyBy into Process, a window, a join, a co-process) becomes a repartition
// topic that the upstream stage writes and the downstream stage reads, and
// every other edge stays inside its stage. A stage runs as one task per
// partition of its input topics; a task sees only its partition's records,
// so an edge inside a stage must never need the records of another
// partition. The plan is a pure function of the graph.

// stagePlan is a job's graph cut into stages.
type stagePlan struct {
	job    string
	stages []stage // in topological order: a stage reads only cuts written by stages before it
	cuts   []cut
}

// stage is a connected part of the graph without key shuffles.
type stage struct {
	ops     []int // its operators' indices in the graph, ascending
	sources []int // the job's sources among them
	reads   []int // the cuts it reads (indices in stagePlan.cuts)
	writes  []int // the cuts it writes
}

// cut is a key shuffle that crosses from one stage to another through a
// repartition topic.
type cut struct {
	from      int // the producing operator
	to        int // the consuming operator
	input     int // the index of the edge among to's inputs
	fromStage int
	toStage   int
	topic     string
}

// planStages cuts g into stages at its hash edges. It refuses what a
// stage's tasks cannot run without another partition's records: a
// broadcast edge (every task would see only its own partition of the
// broadcast stream), and a key shuffle whose two ends stay connected
// through other edges (a stream joined with its own re-keyed self, whose
// un-keyed side a task would see only in part).
func planStages(g runtime.Graph) (stagePlan, error) {
	n := len(g.Operators)
	parent := make([]int, n) // union-find over the edges that stay inside a stage
	for i := range parent {
		parent[i] = i
	}
	var find func(int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	plan := stagePlan{job: g.Job}
	for to, op := range g.Operators {
		for k, in := range op.Inputs {
			switch in.Partitioning {
			case runtime.Hash:
				plan.cuts = append(plan.cuts, cut{from: in.From, to: to, input: k})
			case runtime.Broadcast:
				return stagePlan{}, fmt.Errorf("stream: job %q: operator %q reads %q broadcast: a job with a broadcast input cannot run in stages yet (every task would see only its own partition of the broadcast stream); run it in one process",
					g.Job, op.Name, g.Operators[in.From].Name)
			default:
				parent[find(in.From)] = find(to)
			}
		}
	}
	// Components, numbered in the order of their first operator.
	comp := map[int]int{}
	compOf := make([]int, n)
	var comps [][]int
	for i := range n {
		root := find(i)
		c, ok := comp[root]
		if !ok {
			c = len(comps)
			comp[root] = c
			comps = append(comps, nil)
		}
		compOf[i] = c
		comps[c] = append(comps[c], i)
	}
	for _, ct := range plan.cuts {
		if compOf[ct.from] == compOf[ct.to] {
			return stagePlan{}, fmt.Errorf("stream: job %q: operator %q reads %q both keyed and, through other operators, not keyed: a task would see only part of the un-keyed side; key both sides, or run the job in one process",
				g.Job, g.Operators[ct.to].Name, g.Operators[ct.from].Name)
		}
	}
	// Stages in topological order of the cuts (Kahn's, the lowest
	// component first among those ready, so the order is deterministic).
	indegree := make([]int, len(comps))
	for _, ct := range plan.cuts {
		indegree[compOf[ct.to]]++
	}
	stageOf := make([]int, len(comps))
	done := make([]bool, len(comps))
	for range comps {
		next := -1
		for c := range comps {
			if !done[c] && indegree[c] == 0 {
				next = c
				break
			}
		}
		if next < 0 {
			return stagePlan{}, fmt.Errorf("stream: job %q: its key shuffles form a cycle between stages (internal error)", g.Job)
		}
		done[next] = true
		stageOf[next] = len(plan.stages)
		st := stage{ops: comps[next]}
		for _, op := range st.ops {
			if len(g.Operators[op].Inputs) == 0 {
				st.sources = append(st.sources, op)
			}
		}
		plan.stages = append(plan.stages, st)
		for _, ct := range plan.cuts {
			if compOf[ct.from] == next {
				indegree[compOf[ct.to]]--
			}
		}
	}
	for c := range plan.cuts {
		ct := &plan.cuts[c]
		ct.fromStage, ct.toStage = stageOf[compOf[ct.from]], stageOf[compOf[ct.to]]
		ct.topic = repartitionTopic(g.Job, g.Operators[ct.to].Name, ct.input)
		plan.stages[ct.fromStage].writes = append(plan.stages[ct.fromStage].writes, c)
		plan.stages[ct.toStage].reads = append(plan.stages[ct.toStage].reads, c)
	}
	for s, st := range plan.stages {
		if len(st.sources) == 0 && len(st.reads) == 0 {
			return stagePlan{}, fmt.Errorf("stream: job %q: stage %d has no input (internal error)", g.Job, s)
		}
	}
	return plan, nil
}

// maxTopicLen is the longest name Kafka accepts for a topic.
const maxTopicLen = 249

// repartitionTopic names the topic of the key shuffle into input k of the
// operator named op: "<job>-<op>-<k>-repartition", from names that are
// stable across restarts (state is matched to operators by name), so every
// instance and every run derives the same topic. Characters Kafka does not
// allow in a topic name become '_', and then, so that two names cannot
// meet in one topic, a hash of the original names follows.
func repartitionTopic(job, op string, k int) string {
	name := fmt.Sprintf("%s-%s-%d-repartition", job, op, k)
	clean := strings.Map(func(r rune) rune {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return r
		}
		return '_'
	}, name)
	if clean == name && len(name) <= maxTopicLen {
		return name
	}
	sum := sha256.Sum256([]byte(job + "\x00" + op + "\x00" + fmt.Sprint(k)))
	suffix := "-" + hex.EncodeToString(sum[:6])
	if len(clean)+len(suffix) > maxTopicLen {
		clean = clean[:maxTopicLen-len(suffix)]
	}
	return clean + suffix
}

// describe renders the plan, one line per stage, for messages and tests:
// "stage 1: count, out ← job-count-0-repartition → job-w-0-repartition".
func (p stagePlan) describe(g runtime.Graph) string {
	var b strings.Builder
	for s, st := range p.stages {
		names := make([]string, len(st.ops))
		for i, op := range st.ops {
			names[i] = g.Operators[op].Name
		}
		fmt.Fprintf(&b, "stage %d: %s", s, strings.Join(names, ", "))
		topics := func(cuts []int) []string {
			var ts []string
			for _, c := range cuts {
				ts = append(ts, p.cuts[c].topic)
			}
			return slices.Compact(ts)
		}
		if len(st.reads) > 0 {
			fmt.Fprintf(&b, " ← %s", strings.Join(topics(st.reads), ", "))
		}
		if len(st.writes) > 0 {
			fmt.Fprintf(&b, " → %s", strings.Join(topics(st.writes), ", "))
		}
		b.WriteString("\n")
	}
	return b.String()
}
