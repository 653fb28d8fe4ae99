package main

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/bench/nexmark"
)

// result is one system's measurements on one query.
type result struct {
	query, system string
	tput          throughput
	lat           latency // the queries not windowed; the windowed ones with --windowed-latency
	kill          killRun // the stateful queries (nexmark.Stateful)
}

// settings are what an invocation ran besides the backlog runs: they
// decide how a row's cells read.
type settings struct {
	latency bool // the latency runs were made
	kills   int  // the kill runs' SIGKILLs; 0: no kill runs
}

// displayName is how the tables name a system.
var displayName = map[string]string{"exactly": "exactly", "flink": "Flink", "flink-sql": "Flink SQL", "kstreams": "Kafka Streams"}

// windowed reports whether r's query is windowed: a kill run instead of a latency run.
func (r result) windowed() bool {
	return nexmark.Windowed(r.query)
}

// updating reports whether r's query writes a table: a kill run instead
// of a latency run too.
func (r result) updating() bool {
	return nexmark.Updating(r.query)
}

// noLatency reports whether r's query has no latency run, but a kill run.
func (r result) noLatency() bool { return r.windowed() || r.updating() }

// line is the one-line progress report of r.
func (r result) line() string {
	p50, p99, recovery := ms(r.lat.p50), ms(r.lat.p99), secs(r.recovery())
	if r.noLatency() {
		p50, p99 = "n/a", "n/a"
		if r.lat.byValue { // a windowed latency run: over few windows, the largest told
			p50, p99 = ms(r.lat.p50), fmt.Sprintf("%s (max %s, %d windows)", ms(r.lat.p99), ms(r.lat.max), r.lat.samples)
		}
		if r.kill.kills == 0 {
			recovery = "n/a"
		}
	}
	return fmt.Sprintf("%s %s: %s events/s, %s events/CPU-s, p50 %s, p99 %s, RSS %s, recovery %s, outputs %s",
		r.system, r.query, si(r.tput.rate), si(r.tput.perCPU), p50, p99, mib(r.tput.rss), recovery, r.check())
}

// check says whether the outputs of every run were exactly the expected
// ones: the backlog run, and the latency run with its kill or, for q5 and
// q7, the kill run.
func (r result) check() string {
	var bad []string
	dup, miss, wrong := r.lat.tally()
	for _, c := range []struct {
		run                        string
		duplicates, missing, wrong uint64
	}{
		{"backlog", r.tput.duplicates, r.tput.missing, r.tput.wrong},
		{"latency run", dup, miss, wrong},
		{"kill run", r.kill.duplicates, r.kill.missing, r.kill.wrong},
	} {
		if c.duplicates > 0 {
			bad = append(bad, fmt.Sprintf("%s +%d duplicates", c.run, c.duplicates))
		}
		if c.missing > 0 {
			bad = append(bad, fmt.Sprintf("%s %d missing", c.run, c.missing))
		}
		if c.wrong > 0 {
			bad = append(bad, fmt.Sprintf("%s %d wrong", c.run, c.wrong))
		}
	}
	if r.tput.differ {
		bad = append(bad, "backlog values differ from the reference")
	}
	if r.kill.differ {
		bad = append(bad, "kill run values differ from the reference")
	}
	if r.kill.incomplete {
		bad = append(bad, "kill run not done in time")
	}
	if len(bad) == 0 {
		return "exact"
	}
	return strings.Join(bad, ", ")
}

// recovery is the recovery time of r's kill: its latency run's, or for q5
// and q7 the longest of its kill run's.
func (r result) recovery() time.Duration {
	if r.noLatency() {
		return r.kill.recovery
	}
	return r.lat.recovery
}

// markdown renders the main table, the details table and the runs that
// measured their rows.
func (s *store) markdown() string {
	var b strings.Builder
	b.WriteString("| query | system | events/s | events/CPU-s | p50 | p99 | peak RSS | recovery | outputs | run |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range s.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", r.Query, displayName[r.System],
			r.Rate, r.PerCPU, r.P50, r.P99, r.RSS, r.Recovery, r.Outputs, r.Run+1)
		if i+1 < len(s.Rows) && s.Rows[i+1].Query == r.Query {
			continue
		}
		ours, ok := s.find(r.Query, "exactly")
		if !ok {
			continue
		}
		for _, peer := range systemOrder[1:] {
			p, ok := s.find(r.Query, peer)
			if !ok {
				continue
			}
			latencyRatio := func(a, b int64) string {
				if ours.Windowed {
					return "n/a¹"
				}
				if ours.Updating {
					return "n/a³"
				}
				return ratioOrDash(float64(a), float64(b))
			}
			fmt.Fprintf(&b, "| %s | **exactly / %s** | %s | %s | %s | %s | %s | %s | | |\n", r.Query, displayName[peer],
				ratio(ours.RateValue, p.RateValue), ratio(ours.PerCPUValue, p.PerCPUValue),
				latencyRatio(ours.P50Nanos, p.P50Nanos), latencyRatio(ours.P99Nanos, p.P99Nanos),
				ratio(float64(ours.RSSBytes), float64(p.RSSBytes)), ratioOrDash(float64(ours.RecoveryNanos), float64(p.RecoveryNanos)))
		}
	}
	if slices.ContainsFunc(s.Rows, func(r row) bool { return r.Windowed }) {
		b.WriteString("\n" + windowedNote)
		if slices.ContainsFunc(s.Rows, func(r row) bool { return r.KillRun }) {
			b.WriteString(" " + killRunNote)
		}
		b.WriteString("\n")
	}
	if slices.ContainsFunc(s.Rows, func(r row) bool { return r.Whole }) {
		b.WriteString("\n" + wholeRunNote + "\n")
	}
	if slices.ContainsFunc(s.Rows, func(r row) bool { return r.Updating }) {
		b.WriteString("\n" + updatingNote + "\n")
	}
	b.WriteString("\nDetails of the backlog runs (start-up: process start to first visible output; " +
		"CPU-s: the system's, start to last visible output; broker CPU-s: the Kafka broker's, in the measured window; commits: times the visible output grew, the window spans all but the last), " +
		"number of outputs the latency percentiles are computed on, and SIGKILLs made (windowed queries: in the kill run; count and q3: in the latency run + the kill run):\n\n")
	b.WriteString("| query | system | start-up | CPU-s | broker CPU-s | commits | latency samples | SIGKILLs | run |\n|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range s.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %d |\n", r.Query, displayName[r.System], r.Startup,
			r.CPU, r.BrokerCPU, r.Commits, r.Samples, r.Sigkills, r.Run+1)
	}
	b.WriteString("\nThe runs that measured the rows (commit: `git describe --always --dirty` of the measured tree):\n\n")
	for i, run := range s.Runs {
		fmt.Fprintf(&b, "%d. %s, commit %s, backlog of %d events, %s; %s:\n   `%s`\n", i+1, run.Date, run.Commit, run.Events, run.Load, run.Plan, run.Command)
	}
	return b.String()
}

// ratioOrDash is ratio(a, b), or a dash when either was not measured.
func ratioOrDash(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "—"
	}
	return ratio(a, b)
}

// windowedNote is the footnote of the windowed queries' rows.
const windowedNote = "¹ The windowed queries (q5, q7, q11: windowed on event time) have no latency run: the generator's event time is synthetic " +
	"(10,000 events per second of event time), so the time a window's result takes to become visible has no meaning in wall time. " +
	"Their outputs column checks only the windows ending at least 3 s of event time before the last input event " +
	"(whether a system fires the later ones depends on how its watermark or stream time trails the end of the input), value by value, " +
	"and their events/s count the input events by the event time the visible windows' ends advanced by."

// killRunNote completes windowedNote when the kill runs were made.
const killRunNote = "Each system runs them over the backlog a second time instead, SIGKILLed 0.1–0.8 s after its first visible output " +
	"and again after each recovery (never once every checked output was seen), restarted once the output's stable offsets settled (at least 0.2 s); " +
	"the outputs column covers that run too. Their recovery is the longest time from a kill to the receipt of the first output not visible at it: " +
	"for exactly and Flink that can be a transaction prepared before the kill and committed on restore, " +
	"which Kafka Streams aborts and computes again. " +
	"The stateful queries that are not windowed (count, q3) have that kill run too, besides the kill of their latency run; " +
	"their SIGKILLs read latency run+kill run, and their outputs column covers all three runs."

// wholeRunNote is the footnote of the rates measured over a whole run.
const wholeRunNote = "² Measured over the whole run, start-up and the wait for the last checkpoint included: " +
	"the system's commits of output spanned less than 2 s, too short a window to measure (see the commits column), " +
	"or the query is q12, whose windows of processing time become visible 10 s apart whatever the system's pace (its rows include the last window's wait). " +
	"This understates the system against those measured between commits."

// updatingNote is the footnote of the updating queries' rows.
const updatingNote = "³ The updating queries (q4, q6, q9, q12, q15–q19) compute a table that every bid may change; each system writes each change of a row " +
	"as a Kafka record keyed by the row's key (Flink SQL with the upsert-kafka sink, Kafka Streams a KTable's changelog), " +
	"and the table is the last value of each key. Their outputs column compares that table with the reference's key by key " +
	"(missing: rows absent; wrong: rows of another value, or not in the reference) once the input is consumed; " +
	"a duplicate cannot be told from an update, but a change applied twice makes a wrong count. " +
	"They have no latency run (when a row last changed says nothing of when an input became visible), and a kill run as the windowed queries. " +
	"Their input events in the measured window are what the rows the runner read say of the input behind them " +
	"(q15–q17: the bids they count; q4, q6: the auctions they average; q9, q18, q19: the latest dateTime of their bids). " +
	"q12 windows on processing time, so its windows cannot be compared one by one: its table is the sum per bidder of its windows' counts, " +
	"which a window lost or counted twice makes wrong."

// mark adds the whole-run footnote mark to a rate measured over the whole run.
func (t throughput) mark(v string) string {
	if t.whole {
		return v + "²"
	}
	return v
}

// opt is v, a dash when the latency runs were skipped, or n/a with the
// footnote's mark for a windowed query, which has none.
func (rs settings) opt(r result, v string) string {
	switch {
	case r.windowed():
		return "n/a¹"
	case r.updating():
		return "n/a³"
	case !rs.latency:
		return "—"
	}
	return v
}

// recoveryCell is v for a row with a kill, or a dash when its kill was
// skipped: the latency runs or, for the windowed queries, the kill runs.
func (rs settings) recoveryCell(r result, v string) string {
	switch {
	case r.noLatency() && rs.kills == 0:
		return "—"
	case r.noLatency() && r.kill.kills == 0:
		return "n/a" // the run ended before a kill was due
	case r.noLatency():
		return v
	}
	return rs.opt(r, v)
}

// sigkills is the number of SIGKILLs r's runs made, or a dash when its
// kill was skipped.
func (rs settings) sigkills(r result) string {
	switch {
	case !r.windowed() && nexmark.Stateful(r.query) && rs.kills > 0:
		if !rs.latency {
			return fmt.Sprint(r.kill.kills)
		}
		return fmt.Sprintf("1+%d", r.kill.kills)
	case !r.noLatency():
		return rs.opt(r, "1")
	case rs.kills == 0:
		return "—"
	}
	return fmt.Sprint(r.kill.kills)
}

// find returns the row of system on query.
func (s *store) find(query, system string) (row, bool) {
	for _, r := range s.Rows {
		if r.Query == query && r.System == system {
			return r, true
		}
	}
	return row{}, false
}

// Markers delimit the generated part of the section in the document.
const (
	beginMarker = "<!-- nexmark-bench:begin (generated by bench/cmd/nexmark-bench) -->"
	endMarker   = "<!-- nexmark-bench:end -->"
	heading     = "## Nexmark: exactly, Apache Flink and Kafka Streams side by side"
)

// section is the generated part of the document's section: the tables
// rendered from the store.
func section(table string) string {
	var b strings.Builder
	b.WriteString(beginMarker + "\n\n")
	var kafkaEnv string // the broker's settings, when not scripts/kafka.sh's defaults
	for _, k := range []string{"KAFKA_PORT", "KAFKA_DIR"} {
		if v := os.Getenv(k); v != "" {
			kafkaEnv += k + "=" + v + " "
		}
	}
	fmt.Fprintf(&b, "Each row was measured by the run its last column names (listed below the tables), on a broker started with\n\n"+
		"```sh\neval \"$(%sscripts/kafka.sh start | tail -1 | sed 's/^/export /')\"\n```\n\n", kafkaEnv)
	b.WriteString(table)
	b.WriteString("\n" + endMarker + "\n")
	return b.String()
}

// plan describes the latency and kill runs of an invocation.
func (o options) planText() string {
	var parts []string
	if o.interval != time.Second {
		parts = append(parts, fmt.Sprintf("checkpoint interval %v", o.interval))
	}
	if o.latency {
		parts = append(parts, fmt.Sprintf("latency runs at %.0f events/s, a window of %v starting %v after the first visible output, "+
			"SIGKILL %v after it, %v more input after the restart", o.plan.rate, o.plan.span, o.plan.warm, o.plan.gap, o.plan.others))
	} else {
		parts = append(parts, "no latency runs")
	}
	if o.watermarkInterval != 0 {
		parts = append(parts, fmt.Sprintf("watermarks every %v", o.watermarkInterval))
	}
	if o.windowedLatency > 0 {
		parts = append(parts, fmt.Sprintf("windowed latency runs at %.0f events/s, the windows closing in %v starting %v after the first visible output",
			windowedRate(o.plan.rate), o.windowedLatency, o.plan.warm))
	}
	if o.kills > 0 {
		parts = append(parts, fmt.Sprintf("kill runs of up to %d SIGKILLs", o.kills))
	} else {
		parts = append(parts, "no kill runs")
	}
	return strings.Join(parts, ", ")
}

// writeSection replaces the generated part of the section in the file at
// path, or appends the section with it when the file has none.
func writeSection(path, generated string) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(doc, []byte(beginMarker)), bytes.Index(doc, []byte(endMarker))
	var out []byte
	if i >= 0 && j > i {
		out = append(append(append(out, doc[:i]...), generated...), doc[j+len(endMarker)+1:]...)
	} else {
		out = append(bytes.TrimRight(doc, "\n"), "\n\n"+heading+"\n\n"+generated...)
	}
	return os.WriteFile(path, out, 0o644)
}

// si formats a rate with a k or M suffix; zero (a run too short to
// measure: all its output in one commit) is n/a.
func si(v float64) string {
	switch {
	case v == 0:
		return "n/a"
	case v >= 1e6:
		return fmt.Sprintf("%.2f M", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.0f k", v/1e3)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// ms formats d in whole milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// secs formats d in seconds; negative (never observed) is none.
func secs(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// mib formats a byte count in MiB.
func mib(b int64) string { return fmt.Sprintf("%d MiB", b>>20) }

// ratio formats a/b, or n/a when a or b is zero (not measured) or negative.
func ratio(a, b float64) string {
	if b <= 0 || a <= 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}
