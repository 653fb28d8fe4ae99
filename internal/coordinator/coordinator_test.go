package coordinator

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/scripttest"
)

// TestCoordinatorScripts replays every testdata/coordinator_*.txt script.
//
// A script is a sequence of commands, each on a line starting with "> ",
// followed by the actions the coordinator returned, one per line. Time is
// virtual: "at" sets the clock. Commands:
//
//	config interval=D timeout=D minpause=D subtasks=N [tolerable=N] [names=A,B,...]
//	at D                    set the clock (offset from the start)
//	tick
//	begin ID | begin-fail
//	ack ID SUBTASK [OPERATOR]
//	decline ID SUBTASK
//	persisted ID | persist-fail ID
//	fenced
//	savepoint REQUEST [stop]
//	sources-finished
//	reset
//
// Run with -rewrite to regenerate the expected output after a deliberate change.
func TestCoordinatorScripts(t *testing.T) {
	scripttest.Run(t, "testdata/coordinator_*.txt", newCoordinatorScript)
}

func newCoordinatorScript(t *testing.T) func(f []string) []string {
	var (
		c     *Coordinator
		start = time.Unix(1_700_000_000, 0).UTC()
		now   = start
	)
	return func(f []string) []string {
		var out strings.Builder
		var actions []Action
		switch f[0] {
		case "config":
			cfg := Config{Job: "job", MaxParallelism: 128}
			for _, kv := range f[1:] {
				k, v, _ := strings.Cut(kv, "=")
				switch k {
				case "interval":
					cfg.Interval = mustDuration(t, v)
				case "timeout":
					cfg.Timeout = mustDuration(t, v)
				case "minpause":
					cfg.MinPause = mustDuration(t, v)
				case "caughtup":
					cfg.CaughtUpPause = mustDuration(t, v)
				case "subtasks":
					cfg.Subtasks = mustInt(t, v)
				case "tolerable":
					cfg.TolerableFailures = mustInt(t, v)
				case "names":
					cfg.SubtaskNames = strings.Split(v, ",")
				default:
					t.Fatalf("unknown config key %q", k)
				}
			}
			var err error
			if c, err = NewCoordinator(cfg); err != nil {
				fmt.Fprintf(&out, "error: %v\n", err)
			}
		case "at":
			now = start.Add(mustDuration(t, f[1]))
		case "tick":
			actions = c.Tick(now)
		case "begin":
			actions = c.Begin(now, checkpoint.ID(mustInt(t, f[1])))
		case "begin-fail":
			actions = c.BeginFailed(now, errors.New("disk full"))
		case "ack":
			op := "op"
			if len(f) > 3 {
				op = f[3]
			}
			sub := mustInt(t, f[2])
			actions = c.Ack(now, checkpoint.ID(mustInt(t, f[1])), sub, []SubtaskState{{
				Operator: op, Parallelism: 2, Handle: checkpoint.StateHandle{Subtask: sub, File: fmt.Sprintf("%s-%d", op, sub)},
			}})
		case "decline":
			actions = c.Decline(now, checkpoint.ID(mustInt(t, f[1])), mustInt(t, f[2]), "snapshot failed")
		case "persisted":
			actions = c.MetadataPersisted(now, checkpoint.ID(mustInt(t, f[1])), nil)
		case "persist-fail":
			actions = c.MetadataPersisted(now, checkpoint.ID(mustInt(t, f[1])), errors.New("fsync: input/output error"))
		case "fenced":
			actions = c.Fenced(now, errors.New("not the owner: epoch 3 took over"))
		case "savepoint":
			actions = c.RequestSavepoint(now, uint64(mustInt(t, f[1])), len(f) > 2 && f[2] == "stop")
		case "sources-finished":
			actions = c.SourcesFinished(now)
		case "caught-up":
			actions = c.CaughtUp(now)
		case "reset":
			actions = c.Reset(now)
		case "next-tick":
			switch at, ok := c.NextTick(); {
			case !ok:
				out.WriteString("next-tick: none\n")
			case at.IsZero():
				out.WriteString("next-tick: now\n")
			default:
				fmt.Fprintf(&out, "next-tick: at %v\n", at.Sub(start))
			}
		default:
			t.Fatalf("unknown command %q", f[0])
		}
		for _, a := range actions {
			out.WriteString(a.String() + "\n")
		}
		return lines(out.String())
	}
}

func mustDuration(t *testing.T, s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mustInt(t *testing.T, s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// lines splits a command's output into its lines.
func lines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}
