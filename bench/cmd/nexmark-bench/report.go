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
	lat           latency // the queries but q5 and q7
	kill          killRun // q5 and q7
}

// results are the rows of one invocation.
type results struct {
	rows    []result
	events  uint64
	plan    latencyPlan
	latency bool
	kills   int
	load    string
}

// displayName is how the tables name a system.
var displayName = map[string]string{"exactly": "exactly", "flink": "Flink", "kstreams": "Kafka Streams"}

// windowed reports whether r's query is windowed: a kill run instead of a latency run.
func (r result) windowed() bool {
	_, _, ok := nexmark.Window(r.query)
	return ok
}

// line is the one-line progress report of r.
func (r result) line() string {
	p50, p99, recovery := ms(r.lat.p50), ms(r.lat.p99), secs(r.recovery())
	if r.windowed() {
		p50, p99 = "n/a", "n/a"
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
	for _, c := range []struct {
		run                        string
		duplicates, missing, wrong uint64
	}{
		{"backlog", r.tput.duplicates, r.tput.missing, r.tput.wrong},
		{"latency run", excess(r.lat.outputs, r.lat.expected), excess(r.lat.expected, r.lat.outputs), 0},
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
	if r.windowed() {
		return r.kill.recovery
	}
	return r.lat.recovery
}

// markdown renders the main table and the details table.
func (rs results) markdown() string {
	var b strings.Builder
	b.WriteString("| query | system | events/s | events/CPU-s | p50 | p99 | peak RSS | recovery | outputs |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for i, r := range rs.rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.query, displayName[r.system],
			r.tput.mark(si(r.tput.rate)), r.tput.mark(si(r.tput.perCPU)), rs.opt(r, ms(r.lat.p50)), rs.opt(r, ms(r.lat.p99)), mib(r.tput.rss), rs.recoveryCell(r, secs(r.recovery())), r.check())
		if i+1 < len(rs.rows) && rs.rows[i+1].query == r.query {
			continue
		}
		ours, ok := rs.find(r.query, "exactly")
		if !ok {
			continue
		}
		for _, peer := range []string{"flink", "kstreams"} {
			p, ok := rs.find(r.query, peer)
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "| %s | **exactly / %s** | %s | %s | %s | %s | %s | %s | |\n", r.query, displayName[peer],
				ratio(ours.tput.rate, p.tput.rate), ratio(ours.tput.perCPU, p.tput.perCPU),
				rs.opt(r, ratio(float64(ours.lat.p50), float64(p.lat.p50))), rs.opt(r, ratio(float64(ours.lat.p99), float64(p.lat.p99))),
				ratio(float64(ours.tput.rss), float64(p.tput.rss)), rs.recoveryCell(r, ratio(float64(ours.recovery()), float64(p.recovery()))))
		}
	}
	if slices.ContainsFunc(rs.rows, result.windowed) {
		b.WriteString("\n" + windowedNote)
		if rs.kills > 0 {
			b.WriteString(" " + killRunNote)
		}
		b.WriteString("\n")
	}
	if slices.ContainsFunc(rs.rows, func(r result) bool { return r.tput.whole }) {
		b.WriteString("\n" + wholeRunNote + "\n")
	}
	b.WriteString("\nDetails of the backlog runs (start-up: process start to first visible output; " +
		"CPU-s: the system's, start to last visible output; broker CPU-s: the Kafka broker's, in the measured window; commits: times the visible output grew, the window spans all but the last), " +
		"number of outputs the latency percentiles are computed on, and SIGKILLs made (q5, q7: in the kill run):\n\n")
	b.WriteString("| query | system | start-up | CPU-s | broker CPU-s | commits | latency samples | SIGKILLs |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs.rows {
		broker := "—"
		if r.tput.brokerCPU > 0 {
			broker = fmt.Sprintf("%.1f", r.tput.brokerCPU)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f | %s | %d | %s | %s |\n", r.query, displayName[r.system], secs(r.tput.startup),
			r.tput.totalCPU, broker, r.tput.commits, rs.opt(r, fmt.Sprint(r.lat.samples)), rs.sigkills(r))
	}
	return b.String()
}

// windowedNote is the footnote of the windowed queries' rows.
const windowedNote = "¹ q5 and q7 (windowed on event time) have no latency run: the generator's event time is synthetic " +
	"(10,000 events per second of event time), so the time a window's result takes to become visible has no meaning in wall time. " +
	"Their outputs column checks only the windows ending at least 3 s of event time before the last input event " +
	"(whether a system fires the later ones depends on how its watermark or stream time trails the end of the input), value by value, " +
	"and their events/s count the input events by the event time the visible windows' ends advanced by."

// killRunNote completes windowedNote when the kill runs were made.
const killRunNote = "Each system runs them over the backlog a second time instead, SIGKILLed 0.1–0.8 s after its first visible output " +
	"and again after each recovery (never once every checked output was seen), restarted once the output's stable offsets settled (at least 0.2 s); " +
	"the outputs column covers that run too. Their recovery is the longest time from a kill to the receipt of the first output not visible at it: " +
	"for exactly and Flink that can be a transaction prepared before the kill and committed on restore, " +
	"which Kafka Streams aborts and computes again."

// wholeRunNote is the footnote of the rates measured over a whole run.
const wholeRunNote = "² Measured over the whole run, start-up and the wait for the last checkpoint included: " +
	"the system's commits of output spanned less than 2 s, too short a window to measure (see the commits column). " +
	"This understates the system against those measured between commits."

// mark adds the whole-run footnote mark to a rate measured over the whole run.
func (t throughput) mark(v string) string {
	if t.whole {
		return v + "²"
	}
	return v
}

// opt is v, a dash when the latency runs were skipped, or n/a with the
// footnote's mark for a windowed query, which has none.
func (rs results) opt(r result, v string) string {
	switch {
	case r.windowed():
		return "n/a¹"
	case !rs.latency:
		return "—"
	}
	return v
}

// recoveryCell is v for a row with a kill, or a dash when its kill was
// skipped: the latency runs or, for q5 and q7, the kill runs.
func (rs results) recoveryCell(r result, v string) string {
	switch {
	case r.windowed() && rs.kills == 0:
		return "—"
	case r.windowed() && r.kill.kills == 0:
		return "n/a" // the run ended before a kill was due
	case r.windowed():
		return v
	}
	return rs.opt(r, v)
}

// sigkills is the number of SIGKILLs r's runs made, or a dash when its
// kill was skipped.
func (rs results) sigkills(r result) string {
	switch {
	case !r.windowed():
		return rs.opt(r, "1")
	case rs.kills == 0:
		return "—"
	}
	return fmt.Sprint(r.kill.kills)
}

// find returns the row of system on query.
func (rs results) find(query, system string) (result, bool) {
	for _, r := range rs.rows {
		if r.query == query && r.system == system {
			return r, true
		}
	}
	return result{}, false
}

// Markers delimit the generated part of the section in the document.
const (
	beginMarker = "<!-- nexmark-bench:begin (generated by bench/cmd/nexmark-bench) -->"
	endMarker   = "<!-- nexmark-bench:end -->"
	heading     = "## Nexmark: exactly, Apache Flink and Kafka Streams side by side"
)

// section is the generated part of the document's section.
func (rs results) section(command, table string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n\nMeasured %s, %s.\n\n", beginMarker, time.Now().UTC().Format("2006-01-02 15:04 MST"), rs.load)
	var kafkaEnv string // the broker's settings, when not scripts/kafka.sh's defaults
	for _, k := range []string{"KAFKA_PORT", "KAFKA_DIR"} {
		if v := os.Getenv(k); v != "" {
			kafkaEnv += k + "=" + v + " "
		}
	}
	fmt.Fprintf(&b, "```sh\neval \"$(%sscripts/kafka.sh start | tail -1 | sed 's/^/export /')\"\n%s\n```\n\n", kafkaEnv, command)
	fmt.Fprintf(&b, "Backlog: %d events. Latency runs: %.0f events/s, window of %v starting %v after the first visible output, "+
		"SIGKILL %v after the window, %v more input after the restart.\n\n", rs.events, rs.plan.rate, rs.plan.span, rs.plan.warm, rs.plan.gap, rs.plan.others)
	b.WriteString(table)
	b.WriteString("\n" + endMarker + "\n")
	return b.String()
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
