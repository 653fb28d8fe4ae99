package pipeline

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// runYAML runs the pipeline src in a fresh working directory and returns
// the sorted rows of the SQLite table out of out.db.
func runYAML(t *testing.T, src, query string) []string {
	t.Helper()
	dir := t.TempDir()
	t.Chdir(dir)
	p, err := Parse("test.yaml", []byte(src), env)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background(), RunOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	return queryRows(t, filepath.Join(dir, "out.db"), query)
}

// windowPipeline is a generator of 100 records, keyed by c0 and c1, one
// second apart but for a 5-second jump every 10 records, aggregated per
// window into out.db, with extra added (checkpoints every 50ms unless
// extra has a checkpoint section).
func windowPipeline(window, extra string) string {
	if !strings.Contains(extra, "checkpoint:") {
		extra += "checkpoint: {interval: 50ms}\n"
	}
	return `
name: windows
source:
  kind: generator
  count: 100
  fields:
    customer: '"c" + string(index % 2)'
    amount: index % 5 + 1
    ts: index * 1000 + int(index / 10) * 5000
event_time: {field: ts}
transforms:
  - key_by: customer
  - aggregate:
      window: ` + window + `
      values: {n: count(), total: sum(amount)}
sink: {kind: sqlite, path: out.db, table: t}
` + extra
}

// windowRecord is record i of windowPipeline.
func windowRecord(i int) (key string, amount int, ts int64) {
	return fmt.Sprintf("c%d", i%2), i%5 + 1, int64(i)*1000 + int64(i/10)*5000
}

// windowRows renders expected windows as the query of the window tests does.
func windowRows(wins map[[3]int64]*[2]int) []string {
	var out []string
	for k, v := range wins {
		start, end := time.UnixMilli(k[1]).UTC().Format(time.RFC3339Nano), time.UnixMilli(k[2]).UTC().Format(time.RFC3339Nano)
		out = append(out, fmt.Sprintf("c%d %s %s %d %d", k[0], start, end, v[0], v[1]))
	}
	slices.Sort(out)
	return out
}

const windowQuery = "SELECT key, window_start, window_end, n, total FROM t"

func TestSlidingWindows(t *testing.T) {
	got := runYAML(t, windowPipeline("{kind: sliding, size: 10s, slide: 5s}", ""), windowQuery)
	wins := map[[3]int64]*[2]int{}
	for i := range 100 {
		key, amount, ts := windowRecord(i)
		for start := ts - ts%5000; start > ts-10000; start -= 5000 {
			k := [3]int64{int64(key[1] - '0'), start, start + 10000}
			if wins[k] == nil {
				wins[k] = &[2]int{}
			}
			wins[k][0]++
			wins[k][1] += amount
		}
	}
	if want := windowRows(wins); !slices.Equal(got, want) {
		t.Errorf("sliding windows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestSessionWindowsOnPebble(t *testing.T) {
	got := runYAML(t, windowPipeline("{kind: session, gap: 3s}", "state: {backend: pebble, dir: state}\n"), windowQuery)
	wins := map[[3]int64]*[2]int{}
	last := map[string][3]int64{} // key → its open session (key, start, last record)
	for i := range 100 {
		key, amount, ts := windowRecord(i)
		s, open := last[key]
		if !open || ts >= s[2]+3000 {
			s = [3]int64{int64(key[1] - '0'), ts, ts}
		}
		old := [3]int64{s[0], s[1], s[2] + 3000}
		acc := wins[old]
		if acc == nil {
			acc = &[2]int{}
		}
		delete(wins, old)
		s[2] = ts
		acc[0]++
		acc[1] += amount
		wins[[3]int64{s[0], s[1], ts + 3000}] = acc
		last[key] = s
	}
	want := windowRows(wins)
	if len(want) != 20 || !slices.Equal(got, want) {
		t.Errorf("session windows:\n%s\nwant %d:\n%s", strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
}

// TestRunningAggregates checks count, sum, min, max and avg without a
// window: one updated row per record (one split, one subtask: in order).
func TestRunningAggregates(t *testing.T) {
	got := runYAML(t, `
name: running
source:
  kind: generator
  count: 30
  splits: 1
  fields: {customer: '"c" + string(index % 3)', amount: '(index * 7) % 10', price: 'float(index) / 4'}
transforms:
  - filter: amount != 3
  - key_by: customer
  - aggregate:
      values: {n: count(), total: sum(amount), lo: min(amount), hi: max(price), mean: avg(amount)}
sink: {kind: sqlite, path: out.db, table: t}
`, "SELECT key, n, total, lo, hi, mean FROM t")
	type acc struct {
		n, total, lo int
		hi           float64
	}
	accs := map[string]*acc{}
	var want []string
	for i := range 30 {
		customer, amount, price := fmt.Sprintf("c%d", i%3), (i*7)%10, float64(i)/4
		if amount == 3 {
			continue
		}
		a := accs[customer]
		if a == nil {
			a = &acc{lo: amount, hi: price}
			accs[customer] = a
		}
		a.n++
		a.total += amount
		a.lo, a.hi = min(a.lo, amount), max(a.hi, price)
		want = append(want, fmt.Sprintf("%s %d %d %d %v %v", customer, a.n, a.total, a.lo, a.hi, float64(a.total)/float64(a.n)))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("running aggregates:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
