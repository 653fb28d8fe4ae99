package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/exactlyonce/exactly/bench/internal/child"
	"github.com/exactlyonce/exactly/bench/nexmark"
)

// productionLog is what the producer of a windowed latency run did: when
// it handed each event to the client, and the partition each one went to.
// Its readers (producedAt, closedAt) run once the producer returned.
type productionLog struct {
	mu    sync.Mutex
	marks []producedMark // in order
	parts []int32        // event i's partition; -1 not acknowledged
}

// producedMark is when the producer had sent the events before next:
// every event i < next was handed to the client by at.
type producedMark struct {
	next uint64
	at   time.Time
}

// sent records that the events before next were handed over by at.
func (l *productionLog) sent(next uint64, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.marks = append(l.marks, producedMark{next, at})
}

// placed records that event i went to partition p.
func (l *productionLog) placed(i uint64, p int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for uint64(len(l.parts)) <= i {
		l.parts = append(l.parts, -1)
	}
	l.parts[i] = p
}

// producedAt returns when event i was handed to the client; false when
// it was not.
func (l *productionLog) producedAt(i uint64) (time.Time, bool) {
	k := sort.Search(len(l.marks), func(k int) bool { return l.marks[k].next > i })
	if k == len(l.marks) {
		return time.Time{}, false
	}
	return l.marks[k].at, true
}

// closedAt returns when the input let every watermark pass event time
// due: when the last of the partitions got its first event of event
// number first or later (the events from first on are at or past due);
// a partition's watermark is its greatest event time less the bound, and
// a task's the least of its partitions'. False when some partition got
// none by the end of the run.
func (l *productionLog) closedAt(first uint64) (time.Time, bool) {
	var (
		found  [partitions]bool
		latest time.Time
		n      int
	)
	for i := first; i < uint64(len(l.parts)) && n < partitions; i++ {
		p := l.parts[i]
		if p < 0 || found[p] {
			continue
		}
		at, ok := l.producedAt(i)
		if !ok {
			return time.Time{}, false
		}
		found[p], n = true, n+1
		if at.After(latest) {
			latest = at
		}
	}
	return latest, n == partitions
}

// windowedRate is the input rate of a windowed latency run: the latency
// runs' rate, 2.5% faster. Windows close at a fixed period of event time
// (q5 every 2 s) and checkpoints complete at a fixed period of wall time:
// at exactly the generator's pace a window would wait for the same phase
// of the checkpoint cycle every time (at 1 s intervals, every q5 window of
// a first run waited 1.13 s, no other), so that a run measured one phase,
// whichever its start drew. 2.5% faster, a q5 window closes every 1.951 s
// of wall time, 49 ms earlier in the cycle of a 1 s interval than the
// last one (51 ms later at 100 ms), so that 20 windows sweep the cycle.
// The latency stays the time from the closing event's production.
func windowedRate(rate float64) float64 { return rate * 1.025 }

// readyEvent returns the first event whose event time lets every
// system's watermark (the greatest event time read less
// nexmark.MaxOutOfOrderness) pass end: the event that closes a window
// ending at end. Event i's time is nexmark.DateTime(i).
func readyEvent(end int64) uint64 {
	due := end + nexmark.MaxOutOfOrderness - nexmark.BaseTime // ms after event 0
	if due <= 0 {
		return 0
	}
	return uint64((due*1000 + nexmark.EventSpacingMicros - 1) / nexmark.EventSpacingMicros)
}

// windowLatencies returns, for each window that the input closed (see
// readyEvent and productionLog.closedAt) in [from, to), the time from
// then to the consumer's receipt of the window's last output.
func windowLatencies(outs []windowOutput, log *productionLog, from, to time.Time) []time.Duration {
	visible := map[int64]time.Time{} // window end → its last output's receipt
	for _, o := range outs {
		if at, ok := visible[o.end]; !ok || o.at.After(at) {
			visible[o.end] = o.at
		}
	}
	var lat []time.Duration
	for end, at := range visible {
		closed, ok := log.closedAt(readyEvent(end))
		if ok && !closed.Before(from) && closed.Before(to) {
			lat = append(lat, at.Sub(closed))
		}
	}
	slices.Sort(lat)
	return lat
}

// measureWindowedLatency runs s on the windowed query q fed at
// windowedRate(plan.rate), about nexmark's 10,000 events per second of
// event time, so that event time follows the wall clock: a window can
// close (the first event past its end and the watermarks' bound,
// produced at a known instant) and its visibility latency is the time
// from that event's production to its last output's receipt by a
// read_committed consumer. The windows closing in span, starting warm
// after the first visible output, are measured; then the producer stops
// and the run waits for every checked window (see nexmark.Cutoff) of what
// it produced, compared by value with the reference. It has no SIGKILL:
// the windowed queries' kill runs measure their recovery.
func (e env) measureWindowedLatency(ctx context.Context, s system, q string, plan latencyPlan, span time.Duration) (latency, error) {
	rate := windowedRate(plan.rate)
	name := fmt.Sprintf("%s-%s-%s-wlat", e.prefix, s.name, q)
	in, out := name+"-in", name+"-out"
	dir, err := e.runDir(name)
	if err != nil {
		return latency{}, err
	}
	if err := e.b.createTopics(ctx, nil, in); err != nil {
		return latency{}, err
	}
	// Outputs are timestamped with their window's end in event time,
	// which is of 2026-01-01: kept whatever the broker's clock (see
	// startBacklog).
	if err := e.b.createTopics(ctx, map[string]*string{"retention.ms": kadm.StringPtr("-1")}, out); err != nil {
		return latency{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	col := newCollector(q, 0, reference{})
	col.cutoff = math.MaxInt64 // every window's outputs by value; the checked ones are known once the producer stopped
	consumeErr := make(chan error, 1)
	go func() { consumeErr <- e.b.consume(ctx, out, col.add) }()
	var (
		produced atomic.Uint64
		log      productionLog
	)
	stopProducing := make(chan struct{})
	produceErr := make(chan error, 1)
	go func() { produceErr <- e.produceAtRate(ctx, in, rate, &produced, stopProducing, &log) }()

	logPath := filepath.Join(dir, s.name+".log")
	p, err := child.Start(s.argv(q, in, out, dir, name), logPath)
	if err != nil {
		return latency{}, err
	}
	defer func() { p.Stop(15 * time.Second) }()
	live := liveRun{name: name, logPath: logPath, p: p, produceErr: produceErr, consumeErr: consumeErr}
	wait := func(d time.Duration) error { return live.wait(ctx, d) }
	outputs := func() int { col.mu.Lock(); defer col.mu.Unlock(); return len(col.windows) }
	for deadline := time.Now().Add(e.timeout); outputs() == 0; {
		if time.Now().After(deadline) {
			return latency{}, fmt.Errorf("%s: no output after %v; log: %s", name, e.timeout, logPath)
		}
		if err := wait(sampleEvery); err != nil {
			return latency{}, err
		}
	}
	from := time.Now().Add(plan.warm)
	to := from.Add(span)
	// The windows closing by to become visible after it: produce on.
	if err := wait(time.Until(to.Add(plan.gap))); err != nil {
		return latency{}, err
	}
	close(stopProducing)
	if err := <-produceErr; err != nil {
		return latency{}, err
	}
	want := map[string]uint64{}
	cutoff := nexmark.Cutoff(produced.Load())
	if err := nexmark.CheckedOutputs(q, e.seed, 0, produced.Load(), func(v []byte) { want[string(v)]++ }); err != nil {
		return latency{}, err
	}
	// checked returns the outputs seen of the checked windows, by value.
	checked := func() (map[string]uint64, uint64, error) {
		col.mu.Lock()
		defer col.mu.Unlock()
		got, n := map[string]uint64{}, uint64(0)
		for v, k := range col.got {
			if end, err := nexmark.OutputEnd(q, []byte(v)); err != nil {
				return nil, 0, err
			} else if end <= cutoff {
				got[v] += k
				n += k
			}
		}
		return got, n, col.bad
	}
	var expected uint64
	for _, k := range want {
		expected += k
	}
	for deadline := time.Now().Add(e.timeout); ; {
		_, n, err := checked()
		if err != nil {
			return latency{}, fmt.Errorf("%s: %v; log: %s", name, err, logPath)
		}
		if n >= expected {
			break
		}
		if time.Now().After(deadline) {
			return latency{}, fmt.Errorf("%s: %d of %d checked outputs after %v; log: %s", name, n, expected, e.timeout, logPath)
		}
		if err := wait(sampleEvery); err != nil {
			return latency{}, err
		}
	}
	p.Stop(15 * time.Second)
	time.Sleep(2 * time.Second) // anything written after would be a duplicate
	got, n, err := checked()
	if err != nil {
		return latency{}, err
	}
	l := latency{outputs: n, expected: expected, recovery: -1, byValue: true}
	l.duplicates, l.missing, l.wrong = tally(got, want)
	col.mu.Lock()
	lat := windowLatencies(col.windows, &log, from, to)
	col.mu.Unlock()
	if len(lat) == 0 {
		return latency{}, errors.New(name + ": no window closed in the measured span")
	}
	l.samples = len(lat)
	l.p50, l.p99, l.max = lat[len(lat)/2], lat[len(lat)*99/100], lat[len(lat)-1]
	// Few windows make the percentiles: every latency is told.
	ms := make([]string, len(lat))
	for i, d := range lat {
		ms[i] = strconv.FormatInt(d.Milliseconds(), 10)
	}
	fmt.Fprintf(os.Stderr, "%s %s: the windows' latencies, ms: %s\n", s.name, q, strings.Join(ms, " "))
	return l, nil
}
