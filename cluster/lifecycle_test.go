package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestLifecycle runs scripts of group events and task exits through the
// lifecycle and checks the actions it returns. Each step is
// "event args => actions", actions written "kind task" and separated by
// ", " ("-" for none).
func TestLifecycle(t *testing.T) {
	tests := []struct {
		name  string
		steps []string
	}{
		{"assign starts each task once", []string{
			"assign a/1 a/0 => start a/0, start a/1",
			"assign a/0 a/2 => start a/2",
		}},
		{"revoke stops cleanly and answers after the last exit", []string{
			"assign a/0 a/1 a/2 => start a/0, start a/1, start a/2",
			"revoke a/0 a/1 => stop a/0, stop a/1",
			"exit a/0 nil => -",
			"exit a/1 canceled => answer-revoke",
		}},
		{"revoke of tasks not running answers at once", []string{
			"revoke a/0 => answer-revoke",
			"assign a/0 => start a/0",
			"revoke => answer-revoke",
		}},
		{"lost stops without an answer to wait for", []string{
			"assign a/0 a/1 => start a/0, start a/1",
			"lost a/0 a/1 => stop a/0, stop a/1",
			"exit a/1 canceled => -",
		}},
		{"reassigned while stopping starts after the exit", []string{
			"assign a/0 => start a/0",
			"lost a/0 => stop a/0",
			"assign a/0 => -",
			"exit a/0 canceled => start a/0",
		}},
		{"revoked again after reassignment does not restart", []string{
			"assign a/0 => start a/0",
			"lost a/0 => stop a/0",
			"assign a/0 => -",
			"revoke a/0 => -",
			"exit a/0 canceled => answer-revoke",
		}},
		{"a failed task is parked and the others go on", []string{
			"limit 0",
			"assign a/0 a/1 a/2 => start a/0, start a/1, start a/2",
			"exit a/1 boom => park a/1",
			"exit a/2 nil => park a/2",
			"assign a/3 => start a/3",
			"shutdown => stop a/0, stop a/3",
			"exit a/0 canceled => -",
			"exit a/3 canceled => finish nil",
		}},
		{"a parked task is forgotten when revoked and tried afresh when assigned again", []string{
			"limit 0",
			"assign a/0 a/1 => start a/0, start a/1",
			"exit a/0 boom => park a/0",
			"revoke a/0 => answer-revoke",
			"assign a/0 => start a/0",
			"lost a/0 a/1 => stop a/0, stop a/1",
		}},
		{"the limit of failed tasks fails the instance", []string{
			"limit 2",
			"assign a/0 a/1 a/2 => start a/0, start a/1, start a/2",
			"exit a/1 boom => park a/1",
			"exit a/2 other => park a/2, stop a/0",
			"exit a/0 canceled => finish other",
		}},
		{"a failed task stops the others and fails the instance", []string{
			"assign a/0 a/1 a/2 => start a/0, start a/1, start a/2",
			"exit a/1 boom => park a/1, stop a/0, stop a/2",
			"assign a/3 => -",
			"exit a/0 nil => -",
			"exit a/2 other => finish boom",
		}},
		{"a task taken over while wanted is started again", []string{
			"assign a/0 a/1 => start a/0, start a/1",
			"taken-over a/0 => start a/0",
			"lost a/0 => stop a/0",
			"exit a/0 canceled => -",
		}},
		{"a task taken over while stopping is not started again", []string{
			"assign a/0 => start a/0",
			"revoke a/0 => stop a/0",
			"taken-over a/0 => answer-revoke",
		}},
		{"a task taken over during a shutdown finishes it", []string{
			"assign a/0 => start a/0",
			"shutdown => stop a/0",
			"taken-over a/0 => finish nil",
		}},
		{"a task that ends by itself fails the instance", []string{
			"assign a/0 => start a/0",
			"exit a/0 nil => park a/0, finish ended",
		}},
		{"shutdown stops everything and finishes after the last exit", []string{
			"assign a/0 a/1 => start a/0, start a/1",
			"shutdown => stop a/0, stop a/1",
			"assign a/2 => -",
			"exit a/0 canceled => -",
			"exit a/1 canceled => finish nil",
		}},
		{"a failure of the instance stops everything and finishes with it", []string{
			"assign a/0 a/1 => start a/0, start a/1",
			"fail other => stop a/0, stop a/1",
			"assign a/2 => -",
			"fail boom => -",
			"exit a/0 canceled => -",
			"exit a/1 canceled => finish other",
		}},
		{"a failure with nothing running finishes at once", []string{
			"fail other => finish other",
		}},
		{"a failure during a shutdown keeps the shutdown's cause", []string{
			"assign a/0 => start a/0",
			"shutdown => stop a/0",
			"fail other => -",
			"exit a/0 canceled => finish nil",
		}},
		{"shutdown with nothing running finishes at once", []string{
			"shutdown => finish nil",
		}},
		{"finish comes once", []string{
			"assign a/0 => start a/0",
			"exit a/0 boom => park a/0, finish boom",
			"shutdown => -",
			"exit a/0 nil => -",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Scripts give up at the first failure unless they say otherwise.
			l := newLifecycle(1)
			for i, step := range tt.steps {
				if limit, ok := strings.CutPrefix(step, "limit "); ok {
					if _, err := fmt.Sscan(limit, &l.maxFailed); err != nil {
						t.Fatalf("step %d %q: %v", i, step, err)
					}
					continue
				}
				ev, want, ok := strings.Cut(step, " => ")
				if !ok {
					t.Fatalf("step %d %q: no ' => '", i, step)
				}
				if got := formatActions(apply(t, l, ev)); got != want {
					t.Fatalf("step %d %q: got %q, want %q", i, ev, got, want)
				}
			}
		})
	}
}

// TestLifecycleFailureWhileRevoking checks that a revocation in progress
// is answered even when another task fails meanwhile: the group must not
// wait for an instance that is shutting down.
func TestLifecycleFailureWhileRevoking(t *testing.T) {
	l := newLifecycle(1)
	apply(t, l, "assign a/0 a/1")
	apply(t, l, "revoke a/0")
	if got, want := formatActions(apply(t, l, "exit a/1 boom")), "park a/1"; got != want {
		t.Fatalf("failure of a/1 while a/0 stops: got %q, want %q (a/0 is stopping already)", got, want)
	}
	if got, want := formatActions(apply(t, l, "exit a/0 canceled")), "answer-revoke, finish boom"; got != want {
		t.Fatalf("exit of the revoked a/0: got %q, want %q", got, want)
	}
}

// apply feeds one scripted event to l.
func apply(t *testing.T, l *lifecycle, ev string) []action {
	t.Helper()
	f := strings.Fields(ev)
	switch f[0] {
	case "assign":
		return l.assigned(parseTasks(t, f[1:]))
	case "revoke":
		return l.revoked(parseTasks(t, f[1:]))
	case "lost":
		return l.lost(parseTasks(t, f[1:]))
	case "shutdown":
		return l.stop()
	case "fail":
		return l.fail(scriptErrors[f[1]])
	case "taken-over":
		return l.takenOver(parseTasks(t, f[1:2])[0])
	case "exit":
		if len(f) != 3 {
			t.Fatalf("%q: want exit TASK ERR", ev)
		}
		return l.exited(parseTasks(t, f[1:2])[0], scriptErrors[f[2]])
	}
	t.Fatalf("unknown event %q", ev)
	return nil
}

var scriptErrors = map[string]error{
	"nil":      nil,
	"canceled": fmt.Errorf("run: %w", errCanceled),
	"boom":     errors.New("boom"),
	"other":    errors.New("other"),
}

var errCanceled = errors.New("canceled")

func parseTasks(t *testing.T, fields []string) []Task {
	t.Helper()
	var ts []Task
	for _, f := range fields {
		var tk Task
		topic, part, ok := strings.Cut(f, "/")
		if _, err := fmt.Sscan(part, &tk.Partition); !ok || err != nil {
			t.Fatalf("task %q: want topic/partition", f)
		}
		tk.Topic = topic
		ts = append(ts, tk)
	}
	return ts
}

// formatActions writes actions as the scripts do; a finish's error is
// written as the script error it wraps, or "ended" for a task that ended
// by itself.
func formatActions(acts []action) string {
	if len(acts) == 0 {
		return "-"
	}
	var parts []string
	for _, a := range acts {
		switch a.kind {
		case answerRevoke:
			parts = append(parts, a.kind.String())
		case finish:
			parts = append(parts, "finish "+scriptName(a.err))
		default:
			parts = append(parts, a.kind.String()+" "+a.task.String())
		}
	}
	return strings.Join(parts, ", ")
}

func scriptName(err error) string {
	if err == nil {
		return "nil"
	}
	for name, e := range scriptErrors {
		if e != nil && errors.Is(err, e) {
			return name
		}
	}
	if strings.Contains(err.Error(), "ended although") {
		return "ended"
	}
	return err.Error()
}
