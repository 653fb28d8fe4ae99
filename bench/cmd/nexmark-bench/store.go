package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"slices"
	"strings"
)

// A store holds the table's rows across invocations, so that the table of
// every query is built over several runs (--queries q3,q8 at a time): a
// run replaces the rows of the queries and systems it measured and keeps
// the others, each row naming the run that measured it. --doc writes it
// as JSON beside the document (--results) and renders the section from
// it.
type store struct {
	Runs []runInfo `json:"runs"`
	Rows []row     `json:"rows"`
}

// runInfo is what the table says of the run that measured a row.
type runInfo struct {
	Date    string `json:"date"`    // UTC, to the minute
	Commit  string `json:"commit"`  // git describe of the measured tree; "-dirty" when it had changes
	Load    string `json:"load"`    // load averages at the start and at the end
	Events  uint64 `json:"events"`  // backlog size
	Plan    string `json:"plan"`    // the latency and kill runs' settings
	Command string `json:"command"` // the command that reproduces the run
}

// row is one system's measurements on one query: the cells of the tables
// as rendered when it was measured, and the numbers the ratio rows divide.
type row struct {
	Query  string `json:"query"`
	System string `json:"system"`
	Run    int    `json:"run"` // index into store.Runs

	Rate, PerCPU string // cells
	RSS          string
	P50, P99     string
	Recovery     string
	Outputs      string

	RateValue, PerCPUValue float64 // 0: not measured
	RSSBytes               int64
	P50Nanos, P99Nanos     int64 // 0: not measured (no latency run, or windowed)
	RecoveryNanos          int64 // 0: not measured

	Startup, CPU, BrokerCPU, Commits, Samples, Sigkills string // the details' cells

	Windowed bool // footnote ¹
	KillRun  bool // the kill run's part of footnote ¹
	Whole    bool // footnote ²
	Updating bool // footnote ³
}

// newRow renders r as measured by a run with the given settings.
func newRow(r result, latencyRuns bool, kills int) row {
	rs := settings{latency: latencyRuns, kills: kills}
	out := row{
		Query: r.query, System: r.system,
		Rate: r.tput.mark(si(r.tput.rate)), PerCPU: r.tput.mark(si(r.tput.perCPU)), RSS: mib(r.tput.rss),
		P50: rs.opt(r, ms(r.lat.p50)), P99: rs.opt(r, ms(r.lat.p99)),
		Recovery: rs.recoveryCell(r, secs(r.recovery())), Outputs: r.check(),
		RateValue: r.tput.rate, PerCPUValue: r.tput.perCPU, RSSBytes: r.tput.rss,
		Startup: secs(r.tput.startup), CPU: fmt.Sprintf("%.1f", r.tput.totalCPU), BrokerCPU: "—",
		Commits: fmt.Sprint(r.tput.commits), Samples: rs.opt(r, fmt.Sprint(r.lat.samples)), Sigkills: rs.sigkills(r),
		Windowed: r.windowed(), KillRun: r.windowed() && kills > 0, Whole: r.tput.whole, Updating: r.updating(),
	}
	if r.tput.brokerCPU > 0 {
		out.BrokerCPU = fmt.Sprintf("%.1f", r.tput.brokerCPU)
	}
	if latencyRuns && !r.noLatency() {
		out.P50Nanos, out.P99Nanos = int64(r.lat.p50), int64(r.lat.p99)
	}
	if measured := (r.noLatency() && r.kill.kills > 0) || (latencyRuns && !r.noLatency()); measured && r.recovery() > 0 {
		out.RecoveryNanos = int64(r.recovery())
	}
	return out
}

// add records run and its rows: they replace the rows of the same query
// and system; runs no row names any more are dropped.
func (s *store) add(run runInfo, rows []row) {
	s.Runs = append(s.Runs, run)
	for _, r := range rows {
		r.Run = len(s.Runs) - 1
		s.Rows = slices.DeleteFunc(s.Rows, func(o row) bool { return o.Query == r.Query && o.System == r.System })
		s.Rows = append(s.Rows, r)
	}
	// Renumber the runs still named, in order.
	used := make([]int, len(s.Runs))
	for _, r := range s.Rows {
		used[r.Run] = 1
	}
	var runs []runInfo
	for i, u := range used {
		if u == 1 {
			used[i] = len(runs)
			runs = append(runs, s.Runs[i])
		}
	}
	for i := range s.Rows {
		s.Rows[i].Run = used[s.Rows[i].Run]
	}
	s.Runs = runs
	slices.SortStableFunc(s.Rows, func(a, b row) int {
		if c := queryRank(a.Query) - queryRank(b.Query); c != 0 {
			return c
		}
		return systemRank(a.System) - systemRank(b.System)
	})
}

// queryRank orders the queries as nexmark.Queries does: q0 … q22, count
// after q2.
func queryRank(q string) int {
	if i := slices.Index(queryOrder, q); i >= 0 {
		return i
	}
	return len(queryOrder)
}

// systemRank orders the systems: exactly first, then its peers.
func systemRank(s string) int {
	if i := slices.Index(systemOrder, s); i >= 0 {
		return i
	}
	return len(systemOrder)
}

var (
	queryOrder  = []string{"q0", "q1", "q2", "count", "q3", "q4", "q5", "q6", "q7", "q8", "q9", "q10", "q11", "q12", "q13", "q14", "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22"}
	systemOrder = []string{"exactly", "flink-sql", "flink", "kstreams"}
)

// loadStore reads the store at path; a missing file is an empty store.
func loadStore(path string) (*store, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return &store{}, nil
	}
	if err != nil {
		return nil, err
	}
	var s store
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w (delete it to start the table afresh)", path, err)
	}
	for _, r := range s.Rows {
		if r.Run < 0 || r.Run >= len(s.Runs) {
			return nil, fmt.Errorf("%s: row %s/%s names run %d of %d (delete it to start the table afresh)", path, r.Query, r.System, r.Run, len(s.Runs))
		}
	}
	return &s, nil
}

// save writes s to path.
func (s *store) save(path string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// gitCommit describes the tree the run measured: the short commit, and
// "-dirty" when the working tree has changes.
func gitCommit() string {
	out, err := exec.Command("git", "describe", "--always", "--dirty").Output()
	if err != nil {
		return "unknown"
	}
	return string(bytes.TrimSpace(out))
}

// oneMinuteLoad parses the 1-minute load average of loadAverage's answer.
func oneMinuteLoad(load string) (float64, bool) {
	var v float64
	f := strings.Fields(load)
	if len(f) == 0 {
		return 0, false
	}
	_, err := fmt.Sscan(f[0], &v)
	return v, err == nil
}
