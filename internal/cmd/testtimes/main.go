// Command testtimes prints where the time of a test run went, from the log
// of `go test -json` (scripts/test.sh writes it to .tmp/test.json):
// each package's wall time, sorted, and the slowest tests.
//
//	go run ./internal/cmd/testtimes [-top 25] .tmp/test.json
//
// A package's and a test's time are the Elapsed go test reports for them:
// for a package, the run of its test binary, not its build. The tables are Markdown, ready for docs/testing.md.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json).
type event struct {
	Time    time.Time
	Action  string
	Package string
	Test    string
	Elapsed float64 // seconds
}

// timing is the wall time of a package or a test, and how it ended.
type timing struct {
	name    string
	seconds float64
	result  string // pass, fail or skip
}

// summary is what a log says about a run.
type summary struct {
	packages []timing
	tests    []timing
	wall     time.Duration // from the first event to the last
	failed   []string      // the tests and packages that failed
}

func main() {
	top := flag.Int("top", 25, "the number of slowest tests to list")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: testtimes [-top N] test.json")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	f, err := os.Open(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtimes:", err)
		os.Exit(1)
	}
	defer f.Close()
	s, err := summarize(f)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testtimes: %s: %v\n", flag.Arg(0), err)
		os.Exit(1)
	}
	s.write(os.Stdout, *top)
}

// summarize reads a `go test -json` log. Lines that are not JSON (the
// output of a build failure, for one) are skipped.
func summarize(r io.Reader) (summary, error) {
	var s summary
	var start, end time.Time
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] != '{' {
			continue
		}
		var e event
		if err := json.Unmarshal(line, &e); err != nil || e.Package == "" {
			continue
		}
		if !e.Time.IsZero() {
			if start.IsZero() || e.Time.Before(start) {
				start = e.Time
			}
			if e.Time.After(end) {
				end = e.Time
			}
		}
		switch e.Action {
		case "pass", "fail", "skip":
		default:
			continue
		}
		if e.Test == "" {
			s.packages = append(s.packages, timing{name: e.Package, seconds: e.Elapsed, result: e.Action})
		} else if !strings.Contains(e.Test, "/") {
			s.tests = append(s.tests, timing{name: e.Package + " " + e.Test, seconds: e.Elapsed, result: e.Action})
		}
		if e.Action == "fail" {
			s.failed = append(s.failed, strings.TrimSpace(e.Package+" "+e.Test))
		}
	}
	if err := sc.Err(); err != nil {
		return summary{}, err
	}
	bySeconds := func(a, b timing) int {
		if a.seconds != b.seconds {
			if a.seconds > b.seconds {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	}
	slices.SortFunc(s.packages, bySeconds)
	slices.SortFunc(s.tests, bySeconds)
	s.wall = end.Sub(start)
	return s, nil
}

// write prints the summary as Markdown: the packages that ran for a second
// or more, then the top slowest tests.
func (s summary) write(w io.Writer, top int) {
	fmt.Fprintf(w, "From the first event to the last: %.0f s; %d packages, %d tests", s.wall.Seconds(), len(s.packages), len(s.tests))
	if len(s.failed) > 0 {
		fmt.Fprintf(w, "; FAILED: %s", strings.Join(s.failed, ", "))
	}
	fmt.Fprint(w, "\n\n| package | wall time (s) |\n|---|---:|\n")
	for _, p := range s.packages {
		if p.seconds >= 1 {
			fmt.Fprintf(w, "| %s | %.1f |\n", p.name, p.seconds)
		}
	}
	fmt.Fprint(w, "\n| test | time (s) |\n|---|---:|\n")
	for _, t := range s.tests[:min(top, len(s.tests))] {
		fmt.Fprintf(w, "| %s | %.1f |\n", t.name, t.seconds)
	}
}
