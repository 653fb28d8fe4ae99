package torture

import (
	"strings"
	"testing"
)

// TestReportOfAFailedRunWithCheckedSinks checks that a run that failed
// (a rule broken, a fault not healed) but whose sinks were checked says
// both, and FAIL, even with no anomaly in the sinks.
func TestReportOfAFailedRunWithCheckedSinks(t *testing.T) {
	rep := &Report{Seed: 1, Events: 10, Keys: 2, Faults: map[string]int{"kafka-restart": 1},
		Sinks:   []SinkResult{{Sink: "kafka", Verified: 10}},
		Failure: "torture: seed 1: kafka-restart: kafka.sh restart: exit status 1"}
	var b strings.Builder
	rep.Print(&b)
	for _, want := range []string{"the run failed, the sinks were checked all the same: torture: seed 1: kafka-restart", "anomalies: 0 — FAIL"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report does not say %q:\n%s", want, b.String())
		}
	}
	rep.Failure = ""
	b.Reset()
	rep.Print(&b)
	if !strings.Contains(b.String(), "anomalies: 0 — PASS") {
		t.Errorf("report of a clean run:\n%s", b.String())
	}
}

// TestStallCounter: runs without a new checkpoint stall the torture run
// once more than stalledRuns come in a row; a new checkpoint starts the
// count again.
func TestStallCounter(t *testing.T) {
	var s stallCounter
	if s.stalled(5) {
		t.Fatal("stalled at the first checkpoint count")
	}
	for i := range stalledRuns {
		if s.stalled(5) {
			t.Fatalf("stalled after %d runs without a checkpoint, want after %d", i+1, stalledRuns+1)
		}
	}
	if !s.stalled(5) {
		t.Fatalf("not stalled after %d runs without a checkpoint", stalledRuns+1)
	}
	if s.stalled(6) || s.stalled(6) {
		t.Fatal("stalled right after a new checkpoint")
	}
}
