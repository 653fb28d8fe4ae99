package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/exactlyonce/exactly/bench/internal/child"
	"github.com/exactlyonce/exactly/bench/nexmark"
)

// collector gathers what a read_committed consumer sees of the output topic
// of a backlog run. For the windowed queries it keeps where every output is and its
// window's end, and counts by value the outputs of the checked windows,
// those ending at or before nexmark.Cutoff of the backlog.
type collector struct {
	query    string
	windowed bool
	updating bool
	summing  bool           // the updating query's rows are summed per key into its table (nexmark.Summing)
	cutoff   int64          // the windowed queries: the last checked window end, Unix ms
	want     nexmark.Digest // the updating queries: the final table's

	mu      sync.Mutex
	count   uint64            // outputs seen; windowed queries: those of the checked windows
	lastOff [partitions]int64 // offset of the last data record seen per partition; -1 none
	windows []windowOutput    // windowed queries: every output seen
	got     map[string]uint64 // windowed queries: the checked outputs seen, by value
	digest  nexmark.Digest    // the per-event queries: of the outputs seen; the updating ones: of the table
	bad     error             // windowed and updating queries: the first output that does not parse
	// The updating queries: the table the outputs make, each key's row
	// (hashed with its key) and what it says of the input read (see
	// nexmark.RowProgress), and the input behind the whole table.
	table    map[string]tableRow
	progress int64
	summed   bool            // progress is the sum of the rows', not the greatest
	sums     map[int64]int64 // summing queries: the sum of the rows' counts per key
	sumRow   []byte

	// A kill run's watch: the stable ends once a kill's commits settled,
	// and when the consumer received the first output at or beyond them
	// (zero: none yet). watching is false between kills.
	watching bool
	watch    [partitions]int64
	beyondAt time.Time
}

// tableRow is what a collector keeps of a row of an updating query's table.
type tableRow struct {
	hash     uint64 // nexmark.Hash of nexmark.PairBytes of its key and value
	progress int64
}

// newCollector returns the collector of query q over a backlog of n
// events, whose outputs must be want.
func newCollector(q string, n uint64, want reference) *collector {
	c := &collector{query: q, windowed: nexmark.Windowed(q), updating: nexmark.Updating(q), summing: nexmark.Summing(q), cutoff: nexmark.Cutoff(n),
		want: want.digest, got: map[string]uint64{}, table: map[string]tableRow{}, summed: nexmark.SummedProgress(q), sums: map[int64]int64{}}
	for i := range c.lastOff {
		c.lastOff[i] = -1
	}
	return c
}

// add records one output record; key and value are valid only during
// the call.
func (c *collector) add(r seen, key, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastOff[r.partition] = max(c.lastOff[r.partition], r.offset)
	if c.watching && c.beyondAt.IsZero() && r.offset >= c.watch[r.partition] {
		c.beyondAt = r.at
	}
	if c.summing {
		c.sum(value)
		return
	}
	if c.updating {
		c.update(key, value)
		return
	}
	if !c.windowed {
		c.count++
		c.digest.Add(value)
		return
	}
	end, err := nexmark.OutputEnd(c.query, value)
	if err != nil {
		c.bad = cmp.Or(c.bad, err)
		return
	}
	c.windows = append(c.windows, windowOutput{r.partition, r.offset, end, r.at})
	if end <= c.cutoff {
		c.count++
		c.got[string(value)]++
	}
}

// sum adds the count of a summing query's row (q12: a window's bids of a
// bidder) to its key's sum, the table's row of that key.
func (c *collector) sum(value []byte) {
	key, n, err := nexmark.ParseQ12(value)
	if err != nil {
		c.bad = cmp.Or(c.bad, err)
		return
	}
	c.sums[key] += n
	c.sumRow = nexmark.AppendQ12Sum(c.sumRow[:0], key, c.sums[key])
	c.update(strconv.AppendInt(nil, key, 10), c.sumRow)
}

// update applies a row of an updating query's output to the table: a
// null value deletes the key's row.
func (c *collector) update(key, value []byte) {
	if old, ok := c.table[string(key)]; ok {
		c.digest.N--
		c.digest.Sum -= old.hash
		if c.summed {
			c.progress -= old.progress
		}
		delete(c.table, string(key))
	}
	if value == nil {
		return
	}
	n, _, err := nexmark.RowProgress(c.query, value)
	if err != nil {
		c.bad = cmp.Or(c.bad, err)
		return
	}
	row := tableRow{hash: nexmark.Hash(nexmark.PairBytes(nil, key, value)), progress: n}
	c.table[string(key)] = row
	c.digest.N++
	c.digest.Sum += row.hash
	if c.summed {
		c.progress += n
	} else {
		c.progress = max(c.progress, n)
	}
}

// eventsBehind returns about how many input events the table of an
// updating query's outputs seen so far comes from.
func (c *collector) eventsBehind() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return nexmark.EventsBehind(c.query, c.progress)
}

// done reports whether the expected outputs were all seen and the stable
// ends of the output topic lie past the last record of every partition;
// it returns the offsets of those last records, and the first output that
// did not parse.
func (c *collector) done(expected uint64, ends [partitions]int64) (bool, [partitions]int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.updating {
		return c.digest == c.want && stableAll(ends, c.lastOff), c.lastOff, c.bad
	}
	return c.count >= expected && stableAll(ends, c.lastOff), c.lastOff, c.bad
}

// complete reports whether every expected output was seen, stable or
// not: for the updating queries, whether the table is the reference's.
func (c *collector) complete(expected uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.updating {
		return c.digest == c.want
	}
	return c.count >= expected
}

// seen returns the number of outputs seen; for the windowed queries of
// the checked windows, for the updating ones the rows of the table.
func (c *collector) seen() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.updating {
		return uint64(len(c.table))
	}
	return c.count
}

// visibleEnd returns the latest end of the windows visible below the
// stable offsets ends.
func (c *collector) visibleEnd(ends [partitions]int64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return visibleEnd(c.windows, ends)
}

// watchBeyond starts watching for the first output at or beyond the
// stable offsets ends, those not visible when ends were read; an output
// beyond them received already counts as received now.
func (c *collector) watchBeyond(ends [partitions]int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.watching, c.watch, c.beyondAt = true, ends, time.Time{}
	for p, off := range c.lastOff {
		if off >= ends[p] {
			c.beyondAt = time.Now()
		}
	}
}

// firstBeyond returns when the consumer received the first output at or
// beyond the ends watchBeyond watches, and stops watching once there is one.
func (c *collector) firstBeyond() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := c.beyondAt
	if !at.IsZero() {
		c.watching, c.beyondAt = false, time.Time{}
	}
	return at, !at.IsZero()
}

// reference is what a backlog run's outputs must be: for the windowed queries the
// outputs of the checked windows by value, for the per-event queries the
// digest of all of them, for the updating queries the final table, each
// key's row hashed with its key, and its digest.
type reference struct {
	byValue map[string]uint64
	table   map[string]uint64
	digest  nexmark.Digest
}

// tableReference returns the reference of an updating query's table.
func tableReference(table map[string]string) reference {
	want := reference{table: make(map[string]uint64, len(table))}
	for k, v := range table {
		h := nexmark.Hash(nexmark.PairBytes(nil, []byte(k), []byte(v)))
		want.table[k] = h
		want.digest.N++
		want.digest.Sum += h
	}
	return want
}

// check compares the outputs seen with the expected ones: for the windowed queries
// value by value, for the others by number and, when as many as expected
// were seen, by digest (differ: the values are not the reference's).
func (c *collector) check(expected uint64, want reference) (duplicates, missing, wrong uint64, differ bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.windowed {
		d, m, w := tally(c.got, want.byValue)
		return d, m, w, false
	}
	if c.updating { // rows missing, and rows of another value or not in the reference
		for k, h := range want.table {
			if got, ok := c.table[k]; !ok {
				missing++
			} else if got.hash != h {
				wrong++
			}
		}
		for k := range c.table {
			if _, ok := want.table[k]; !ok {
				wrong++
			}
		}
		return 0, missing, wrong, false
	}
	differ = c.count == expected && want.digest.N == expected && c.digest != want.digest
	return excess(c.count, expected), excess(expected, c.count), 0, differ
}

// backlogRun is one system running one query over the backlog, with a
// read_committed consumer collecting its output.
type backlogRun struct {
	name, out, logPath string
	argv               []string
	expected           uint64        // outputs to wait for; for the windowed queries of the checked windows
	timeout            time.Duration // the longest wait for them
	col                *collector
	p                  *child.Process
	began              time.Time
	consumeErr         chan error
	cancel             context.CancelFunc // ends the consumer
}

// errDeadline reports a run whose outputs were not all visible in time.
var errDeadline = errors.New("not done in time")

// startBacklog creates the output topic of the run of s on q named after
// kind, starts consuming it and starts s on the backlog topic in (n
// events, expected outputs). close ends the run.
func (e env) startBacklog(ctx context.Context, s system, q, in, kind string, n, expected uint64, want reference) (*backlogRun, error) {
	name := fmt.Sprintf("%s-%s-%s-%s", e.prefix, s.name, q, kind)
	dir, err := e.runDir(name)
	if err != nil {
		return nil, err
	}
	r := &backlogRun{name: name, out: name + "-out", logPath: filepath.Join(dir, s.name+".log"),
		expected: expected, timeout: e.timeout, col: newCollector(q, n, want), consumeErr: make(chan error, 1)}
	r.argv = s.argv(q, in, r.out, dir, name)
	var configs map[string]*string
	if r.col.windowed {
		// The outputs of the windowed queries are timestamped with their window's end,
		// in the generator's event time, which starts at nexmark.BaseTime:
		// time-based retention would delete them once the broker's clock is
		// retention.ms past that, maybe before the runner reads them.
		configs = map[string]*string{"retention.ms": kadm.StringPtr("-1")}
	}
	if err := e.b.createTopics(ctx, configs, r.out); err != nil {
		return nil, err
	}
	ctx, r.cancel = context.WithCancel(ctx)
	go func() { r.consumeErr <- e.b.consume(ctx, r.out, r.col.add) }()
	if r.p, err = child.Start(r.argv, r.logPath); err != nil {
		r.cancel()
		return nil, err
	}
	r.began = time.Now()
	return r, nil
}

// wait waits for the next tick of t; it fails when deadline (a timer of
// r.timeout) has passed, with errDeadline, when the consumer failed or when
// the system exited.
func (r *backlogRun) wait(t *time.Ticker, deadline <-chan time.Time) error {
	select {
	case <-deadline:
		return fmt.Errorf("%s: %w: %d of %d outputs after %v; log: %s", r.name, errDeadline, r.col.seen(), r.expected, r.timeout, r.logPath)
	case err := <-r.consumeErr:
		return err
	case <-r.p.Done:
		return fmt.Errorf("%s: the system exited (%v); log: %s", r.name, r.p.Err, r.logPath)
	case <-t.C:
		return nil
	}
}

// settle stops the system and waits for any output written after the last
// expected one: that would be a duplicate.
func (r *backlogRun) settle() {
	r.p.Stop(15 * time.Second)
	time.Sleep(2 * time.Second)
}

// close stops the system and the consumer.
func (r *backlogRun) close() {
	r.p.Stop(15 * time.Second)
	r.cancel()
}
