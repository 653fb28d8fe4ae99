package main

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/bench/internal/child"
	"github.com/exactlyonce/exactly/bench/internal/procstat"
	"github.com/exactlyonce/exactly/bench/nexmark"
)

// sampleEvery is the period of the runner's observations of a run.
const sampleEvery = 50 * time.Millisecond

// minWindow is the shortest window between commits that rates are measured
// on; below it the whole run is used.
const minWindow = 2 * time.Second

// throughput is the result of one system on one query over the backlog.
type throughput struct {
	whole     bool          // rate and perCPU are over the whole run: the commits spanned less than minWindow
	startup   time.Duration // process start to first output visible
	rate      float64       // input events/s between the first and the last-but-one commit of output
	perCPU    float64       // input events per CPU-second of the system in that window
	totalCPU  float64       // the system's CPU-seconds from its start to the last output visible
	brokerCPU float64       // the broker's CPU-seconds in the window; 0 when not measured
	commits   int           // times the visible output grew
	rss       int64         // peak RSS (VmHWM), bytes
	// The outputs, for the windowed queries those of the checked windows only: the
	// copies of expected outputs beyond the expected number, the expected
	// outputs not seen, and (windowed queries) the outputs seen that are not expected.
	duplicates, missing, wrong uint64
	differ                     bool // the per-event queries: as many outputs as expected, but other values
}

// windowOutput is where an output of q5 or q7 is, the end of its window
// and when the runner's consumer received it.
type windowOutput struct {
	partition int32
	offset    int64
	end       int64 // Unix ms
	at        time.Time
}

// sample is one observation of a throughput run.
type sample struct {
	at        time.Time
	ends      [partitions]int64 // last stable offsets of the output topic
	cpu       float64           // CPU-seconds of the system
	brokerCPU float64
	behind    float64 // the updating queries: input events behind the table seen (collector.eventsBehind)
}

// env is what every measurement needs.
type env struct {
	b         *broker
	work      string // scratch directory; one subdirectory per run
	prefix    string // topic name prefix of this invocation
	seed      uint64
	brokerPID int // 0: broker CPU not measured
	timeout   time.Duration
}

// runDir makes the private directory of one run.
func (e env) runDir(name string) (string, error) {
	dir := filepath.Join(e.work, name)
	return dir, os.MkdirAll(dir, 0o755)
}

// measureThroughput runs s on query q over the backlog in topic in (n
// events, expected outputs) until every output is visible. For the windowed queries it
// counts only the outputs of the checked windows, those ending at or before
// nexmark.Cutoff(n), waits for those, and compares them with want value by
// value.
func (e env) measureThroughput(ctx context.Context, s system, q, in string, n, expected uint64, want reference) (throughput, error) {
	r, err := e.startBacklog(ctx, s, q, in, "tput", n, expected, want)
	if err != nil {
		return throughput{}, err
	}
	defer r.close()
	pid := r.p.Cmd.Process.Pid

	var (
		samples []sample
		doneOff [partitions]int64 // the last records' offsets when the run was found done
	)
	deadline := time.After(e.timeout)
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for done := false; !done; {
		if err := r.wait(tick, deadline); err != nil {
			return throughput{}, err
		}
		sm := sample{at: time.Now(), behind: r.col.eventsBehind()}
		if sm.ends, err = e.b.committedEnds(ctx, r.out); err != nil {
			return throughput{}, err
		}
		if sm.cpu, err = procstat.CPUSeconds(pid); err != nil {
			return throughput{}, err
		}
		if e.brokerPID != 0 {
			if sm.brokerCPU, err = procstat.CPUSeconds(e.brokerPID); err != nil {
				return throughput{}, err
			}
		}
		samples = append(samples, sm)
		if done, doneOff, err = r.col.done(expected, sm.ends); err != nil {
			return throughput{}, fmt.Errorf("%s: %v; log: %s", r.name, err, r.logPath)
		}
	}
	mem, err := procstat.ReadMemory(pid)
	if err != nil {
		return throughput{}, err
	}
	rss := mem.Peak
	r.settle()

	last := slices.IndexFunc(samples, func(sm sample) bool { return stableAll(sm.ends, doneOff) })
	// Commits: the samples at which the visible output grew. The window
	// runs from the first commit to the one before the last: the last
	// commit holds the tail of the backlog, which waited for a checkpoint
	// after the input ran out, and the first the output of the start-up.
	var (
		commits []sample
		at      []int // the commits' indices in samples
	)
	for i, sm := range samples[:last+1] {
		if sum(sm.ends) > 0 && (i == 0 || sum(sm.ends) > sum(samples[i-1].ends)) {
			commits, at = append(commits, sm), append(at, i)
		}
	}
	li := len(commits) - 1
	if len(commits) >= 3 {
		li--
	}
	f, l := commits[0], commits[li]
	// Input events behind the outputs that became visible in the window: in
	// proportion to the outputs; for the windowed queries, as many as the event time of
	// the visible windows' ends advanced by.
	var inWindow float64
	switch {
	case r.col.windowed:
		inWindow = float64(r.col.visibleEnd(l.ends)-r.col.visibleEnd(f.ends)) * 1000 / nexmark.EventSpacingMicros
	case r.col.updating:
		// As many as the rows of the table say (see nexmark.RowProgress),
		// as the consumer saw it once it had read a commit: at the last
		// sample before the next commit (reading committed records only,
		// it sees nothing of that one before), or at the end.
		caughtUp := func(k int) float64 {
			if k+1 < len(at) {
				return samples[at[k+1]-1].behind
			}
			return samples[last].behind
		}
		inWindow = caughtUp(li) - caughtUp(0)
	default:
		inWindow = float64(n) * float64(sum(l.ends)-sum(f.ends)) / float64(expected)
	}
	// A system that took the whole backlog in a few checkpoints leaves a
	// window too short to measure (two commits 50 ms apart would claim
	// 100 M events/s): it is measured over its whole run instead, start-up
	// included, which only understates it. q12's outputs are windows of
	// processing time, visible once a window of 10 s closed, so what its
	// commits show is the windows' pace, not the system's: it is always
	// measured over its whole run, the last window's wait included.
	startup := f.at.Sub(r.began)
	whole := l.at.Sub(f.at) < minWindow || r.col.summing
	if whole {
		f, l, inWindow = sample{at: r.began, brokerCPU: samples[0].brokerCPU}, samples[last], float64(n)
	}
	t := throughput{
		whole:     whole,
		startup:   startup,
		totalCPU:  samples[last].cpu,
		brokerCPU: l.brokerCPU - f.brokerCPU,
		rss:       rss,
		commits:   len(commits),
	}
	t.duplicates, t.missing, t.wrong, t.differ = r.col.check(expected, want)
	if w := l.at.Sub(f.at).Seconds(); w > 0 {
		t.rate = inWindow / w
	}
	if c := l.cpu - f.cpu; c > 0 {
		t.perCPU = inWindow / c
	}
	return t, nil
}

// tally compares the outputs seen with the expected ones, both counted by
// value: duplicates are the copies of expected values beyond their number,
// missing the expected values not seen, wrong the values seen not expected.
func tally(got, want map[string]uint64) (duplicates, missing, wrong uint64) {
	for v, n := range got {
		if w := want[v]; w == 0 {
			wrong += n
		} else {
			duplicates += excess(n, w)
		}
	}
	for v, w := range want {
		missing += excess(w, got[v])
	}
	return duplicates, missing, wrong
}

// excess is a-b, or 0 when b ≥ a.
func excess(a, b uint64) uint64 {
	if a > b {
		return a - b
	}
	return 0
}

// visibleEnd returns the latest end of the windows of outs visible below
// the stable offsets ends.
func visibleEnd(outs []windowOutput, ends [partitions]int64) int64 {
	var end int64
	for _, o := range outs {
		if o.offset < ends[o.partition] {
			end = max(end, o.end)
		}
	}
	return end
}

// stableAll reports whether every partition's stable end is past its last data record.
func stableAll(ends, lastOff [partitions]int64) bool {
	for i := range ends {
		if ends[i] <= lastOff[i] {
			return false
		}
	}
	return true
}

// sum is the total of the partitions' offsets.
func sum(ends [partitions]int64) int64 {
	var s int64
	for _, v := range ends {
		s += v
	}
	return s
}

// latency is the result of one system on one query fed at a fixed rate,
// SIGKILLed once and restarted.
type latency struct {
	p50, p99 time.Duration // visibility latency before the kill
	max      time.Duration // the windowed queries: the largest (their samples are few)
	samples  int           // outputs the percentiles are computed on; the windowed queries: windows
	recovery time.Duration // SIGKILL to the first visible output of an input produced after it
	outputs  uint64        // outputs seen in the end, including any duplicate
	expected uint64
	// The windowed queries: the checked outputs compared by value (see
	// measureWindowedLatency); the others are compared by number.
	byValue                    bool
	duplicates, missing, wrong uint64
}

// tally returns the duplicates, missing and wrong outputs of the run.
func (l latency) tally() (duplicates, missing, wrong uint64) {
	if l.byValue {
		return l.duplicates, l.missing, l.wrong
	}
	return excess(l.outputs, l.expected), excess(l.expected, l.outputs), 0
}

// latencyPlan times a latency run. The system is started with the producer
// already running; warm after its first output is visible the measured
// window of span begins; gap after the window the system is SIGKILLed and
// started again; after later the producer stops.
type latencyPlan struct {
	rate                    float64
	warm, span, gap, others time.Duration
}

// measureLatency runs s on query q fed at plan.rate events/s.
func (e env) measureLatency(ctx context.Context, s system, q string, plan latencyPlan) (latency, error) {
	name := fmt.Sprintf("%s-%s-%s-lat", e.prefix, s.name, q)
	in, out := name+"-in", name+"-out"
	dir, err := e.runDir(name)
	if err != nil {
		return latency{}, err
	}
	if err := e.b.createTopics(ctx, nil, in, out); err != nil {
		return latency{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		mu   sync.Mutex
		recs []seen
	)
	consumeErr := make(chan error, 1)
	go func() {
		consumeErr <- e.b.consume(ctx, out, func(r seen, _, _ []byte) {
			mu.Lock()
			recs = append(recs, r)
			mu.Unlock()
		})
	}()
	var produced atomic.Uint64
	stopProducing := make(chan struct{})
	produceErr := make(chan error, 1)
	go func() { produceErr <- e.produceAtRate(ctx, in, plan.rate, &produced, stopProducing, nil) }()

	logPath := filepath.Join(dir, s.name+".log")
	argv := s.argv(q, in, out, dir, name)
	p, err := child.Start(argv, logPath)
	if err != nil {
		return latency{}, err
	}
	defer func() { p.Stop(15 * time.Second) }()
	live := liveRun{name: name, logPath: logPath, p: p, produceErr: produceErr, consumeErr: consumeErr}
	wait := func(d time.Duration) error { return live.wait(ctx, d) }
	seenCount := func() int { mu.Lock(); defer mu.Unlock(); return len(recs) }
	for deadline := time.Now().Add(e.timeout); seenCount() == 0; {
		if time.Now().After(deadline) {
			return latency{}, fmt.Errorf("%s: no output after %v; log: %s", name, e.timeout, logPath)
		}
		if err := wait(sampleEvery); err != nil {
			return latency{}, err
		}
	}
	from := time.Now().Add(plan.warm)
	to := from.Add(plan.span)
	if err := wait(time.Until(to.Add(plan.gap))); err != nil {
		return latency{}, err
	}
	killed := time.Now()
	p.Kill()
	if p, err = child.Start(argv, logPath); err != nil {
		return latency{}, err
	}
	live.p = p
	if err := wait(plan.others); err != nil {
		return latency{}, err
	}
	close(stopProducing)
	if err := <-produceErr; err != nil {
		return latency{}, err
	}
	expected, err := nexmark.Expected(q, e.seed, 0, produced.Load())
	if err != nil {
		return latency{}, err
	}
	for deadline := time.Now().Add(e.timeout); uint64(seenCount()) < expected; {
		if time.Now().After(deadline) {
			return latency{}, fmt.Errorf("%s: %d of %d outputs after %v; log: %s", name, seenCount(), expected, e.timeout, logPath)
		}
		if err := wait(sampleEvery); err != nil {
			return latency{}, err
		}
	}
	p.Stop(15 * time.Second)
	time.Sleep(2 * time.Second) // anything written after the last expected output would be a duplicate

	mu.Lock()
	defer mu.Unlock()
	l := latency{outputs: uint64(len(recs)), expected: expected, recovery: -1}
	var lat []time.Duration
	for _, r := range recs {
		if !r.input.Before(from) && r.input.Before(to) {
			lat = append(lat, r.at.Sub(r.input))
		}
		if !r.input.Before(killed) && (l.recovery < 0 || r.at.Sub(killed) < l.recovery) {
			l.recovery = r.at.Sub(killed)
		}
	}
	if len(lat) == 0 {
		return latency{}, errors.New(name + ": no output in the measured window")
	}
	slices.Sort(lat)
	l.samples = len(lat)
	l.p50, l.p99, l.max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	return l, nil
}

// liveRun is what a latency run waits on besides time: the system, the
// producer and the consumer, any of which may fail.
type liveRun struct {
	name, logPath          string
	p                      *child.Process // the system's current process
	produceErr, consumeErr chan error
}

// wait waits for d, failing when the system, the producer or the consumer
// fails, or ctx ends.
func (r *liveRun) wait(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-r.p.Done:
		return fmt.Errorf("%s: the system exited (%v); log: %s", r.name, r.p.Err, r.logPath)
	case err := <-r.produceErr:
		return fmt.Errorf("%s: producing: %v", r.name, err)
	case err := <-r.consumeErr:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// produceAtRate writes events 0, 1, ... of the stream to topic at rate
// events/s, each timestamped when produced, until stop is closed; it
// returns once every record is acknowledged. Into log, when not nil, it
// records each round of produce calls (the events handed to the client
// by then, timestamped so) and each event's partition.
func (e env) produceAtRate(ctx context.Context, topic string, rate float64, produced *atomic.Uint64, stop chan struct{}, log *productionLog) error {
	cl, err := e.b.producer(topic)
	if err != nil {
		return err
	}
	defer cl.Close()
	var failed atomic.Pointer[error]
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			failed.CompareAndSwap(nil, &err)
		}
	}
	began := time.Now()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var i uint64
	for {
		select {
		case <-stop:
			if err := cl.Flush(ctx); err != nil {
				return err
			}
			if p := failed.Load(); p != nil {
				return *p
			}
			produced.Store(i)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		now := time.Now()
		for due := uint64(now.Sub(began).Seconds() * rate); i < due; i++ {
			rec := &kgo.Record{Value: nexmark.Append(nil, e.seed, i), Timestamp: now}
			if log == nil {
				cl.Produce(ctx, rec, promise)
				continue
			}
			idx := i
			cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
				promise(r, err)
				if err == nil {
					log.placed(idx, r.Partition)
				}
			})
		}
		if log != nil {
			log.sent(i, now)
		}
		if p := failed.Load(); p != nil {
			return *p
		}
	}
}

// killRun is the result of a stateful query's run over the backlog with
// SIGKILLs (see nexmark.Stateful).
type killRun struct {
	kills int
	// recovery is the longest time from a SIGKILL to the receipt of the
	// first output not visible at it; -1 when no kill was made.
	recovery time.Duration
	// incomplete: the checked outputs were not all visible within the
	// timeout after the last kill; the missing ones count as missing.
	incomplete                 bool
	duplicates, missing, wrong uint64 // of the checked outputs, as in throughput
	differ                     bool
}

// Delays of the kill runs: a SIGKILL comes a uniform random delay in
// [killAfterMin, killAfterMax) after the system's first visible output, or
// after the first output of the restarted system following the previous
// kill; never once every checked output was seen.
const (
	killAfterMin = 100 * time.Millisecond
	killAfterMax = 800 * time.Millisecond
	// settleMin and settleMax bound the wait after a kill for the commits
	// the system sent before it died to become visible; the restart
	// follows, and the wait counts in the recovery time.
	settleMin = 100 * time.Millisecond
	settleMax = 2 * time.Second
)

// measureKills runs s on the stateful query q over the backlog in topic in
// (n events, expected checked outputs, want those by value), SIGKILLs it up
// to kills times, starting it again each time once the output topic's
// stable ends settled, and compares the outputs with want once every one
// is visible, or the timeout after the last kill passed. The delays come
// from the seed, the system and the query.
func (e env) measureKills(ctx context.Context, s system, q, in string, n, expected uint64, want reference, kills int) (killRun, error) {
	r, err := e.startBacklog(ctx, s, q, in, "kill", n, expected, want)
	if err != nil {
		return killRun{}, err
	}
	defer r.close()
	h := fnv.New64a()
	h.Write([]byte(s.name + "/" + q))
	rng := rand.New(rand.NewPCG(e.seed, h.Sum64()))
	delay := func() time.Duration {
		return killAfterMin + time.Duration(rng.Int64N(int64(killAfterMax-killAfterMin)))
	}

	res := killRun{recovery: -1}
	var (
		killAt time.Time // when the next kill is due; zero: before the first output
		killed time.Time // the last kill, while its recovery is not seen; zero: none
	)
	deadline := time.After(e.timeout)
	tick := time.NewTicker(sampleEvery)
	defer tick.Stop()
	for {
		if err := r.wait(tick, deadline); errors.Is(err, errDeadline) {
			res.incomplete = true
			break
		} else if err != nil {
			return killRun{}, err
		}
		ends, err := e.b.committedEnds(ctx, r.out)
		if err != nil {
			return killRun{}, err
		}
		now := time.Now()
		switch {
		case !killed.IsZero():
			if at, ok := r.col.firstBeyond(); ok {
				res.recovery = max(res.recovery, at.Sub(killed))
				killed, killAt = time.Time{}, at.Add(delay())
			}
		case killAt.IsZero():
			if sum(ends) > 0 {
				killAt = now.Add(delay())
			}
		}
		done, _, err := r.col.done(expected, ends)
		if err != nil {
			return killRun{}, fmt.Errorf("%s: %v; log: %s", r.name, err, r.logPath)
		}
		if done {
			break
		}
		if res.kills == kills || !killed.IsZero() || killAt.IsZero() || now.Before(killAt) || r.col.complete(expected) {
			continue
		}
		r.p.Kill()
		killed = time.Now()
		res.kills++
		killEnds, err := e.settledEnds(ctx, r.out)
		if err != nil {
			return killRun{}, err
		}
		r.col.watchBeyond(killEnds)
		if r.p, err = child.Start(r.argv, r.logPath); err != nil {
			return killRun{}, err
		}
		deadline = time.After(e.timeout)
	}
	r.settle()
	res.duplicates, res.missing, res.wrong, res.differ = r.col.check(expected, want)
	return res, nil
}

// settledEnds returns the stable ends of topic once two reads settleMin
// apart agree, or after settleMax: a commit that a SIGKILLed system sent
// just before it died may still become visible, and must not pass for
// output of the restarted system.
func (e env) settledEnds(ctx context.Context, topic string) ([partitions]int64, error) {
	var last [partitions]int64
	for began := time.Now(); ; {
		time.Sleep(settleMin)
		ends, err := e.b.committedEnds(ctx, topic)
		if err != nil || ends == last || time.Since(began) >= settleMax {
			return ends, err
		}
		last = ends
	}
}
