package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/exactlyonce/exactly/control"
)

const controlUsage = `Usage: exactly %s [flags]

%s

It talks to the control API of a running job (stream.Options.Control, or
'exactly run'): see docs/operations.md.

Flags:
`

// controlCommands are the subcommands that talk to a running job, with
// what each does.
var controlCommands = map[string]string{
	"status":    "Prints the status of a running job: its state, operators with their rates and\nbackpressure, checkpoints, pending commits, restarts and source lag.",
	"savepoint": "Takes a savepoint of a running job and prints where it is. Needs the job's token.",
	"stop":      "Stops a running job, committing what its last checkpoint covers; with\n--savepoint, takes a savepoint first and prints where it is. Needs the job's token.",
}

type controlFlags struct {
	addr, tokenFile string
	timeout         time.Duration
	json, savepoint bool
	subtasks        bool
}

func parseControlFlags(cmd string, args []string, out io.Writer) (controlFlags, error) {
	f := controlFlags{addr: defaultControlAddr, timeout: 5 * time.Minute}
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.Func("addr", "the job's control address, host:port (default 127.0.0.1:8081)", func(s string) error {
		if _, _, err := net.SplitHostPort(strings.TrimPrefix(s, "http://")); err != nil {
			return fmt.Errorf("not host:port: use for instance --addr 127.0.0.1:8081")
		}
		f.addr = s
		return nil
	})
	fs.Func("timeout", "how long to wait for the answer (default 5m)", func(s string) error {
		d, err := time.ParseDuration(s)
		if err != nil || d <= 0 {
			return fmt.Errorf("not a positive duration: use for instance --timeout 30s")
		}
		f.timeout = d
		return nil
	})
	if cmd != "status" {
		fs.StringVar(&f.tokenFile, "token-file", "", "file holding the job's control token (its --token-file, or stream.Options.Control.TokenFile); default: the job's local token, which exactly run writes for a job on a loopback address started without one")
	}
	if cmd == "status" {
		fs.BoolVar(&f.json, "json", false, "print the API's JSON instead of a summary")
		fs.BoolVar(&f.subtasks, "subtasks", false, "add a line per subtask: its task, busy and backpressured shares, watermark")
	}
	if cmd == "stop" {
		fs.BoolVar(&f.savepoint, "savepoint", false, "take a savepoint, commit its output, then stop")
	}
	if err := parseFlags(fs, fmt.Sprintf(controlUsage, cmd, controlCommands[cmd]), args, out); err != nil {
		return f, err
	}
	return f, nil
}

// runControl runs status, savepoint or stop against a running job.
func runControl(ctx context.Context, cmd string, args []string, out io.Writer) error {
	f, err := parseControlFlags(cmd, args, out)
	if err != nil {
		return err
	}
	c := control.Client{Addr: f.addr}
	if f.tokenFile != "" {
		if c.Token, err = control.LoadToken(f.tokenFile, ""); err != nil {
			return fmt.Errorf("%s: --token-file %s: %w", cmd, f.tokenFile, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	if cmd != "status" && f.tokenFile == "" {
		if c.Token, err = localTokenOf(ctx, c); err != nil {
			return fmt.Errorf("%s: %w", cmd, err)
		}
	}
	switch cmd {
	case "status":
		st, err := c.Status(ctx)
		if err != nil {
			return fmt.Errorf("status: %w", err)
		}
		if f.json {
			enc := json.NewEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(st)
		}
		printStatus(out, st, f.subtasks)
	case "savepoint":
		path, err := c.Savepoint(ctx)
		if err != nil {
			return fmt.Errorf("savepoint: %w", err)
		}
		fmt.Fprintln(out, path)
	case "stop":
		path, err := c.Stop(ctx, f.savepoint)
		if err != nil {
			return fmt.Errorf("stop: %w", err)
		}
		if path != "" {
			fmt.Fprintln(out, path)
		} else {
			fmt.Fprintln(out, "stopping: the job commits what its last checkpoint covers and ends")
		}
	}
	return nil
}

// localTokenOf returns the local token of the job that c's address
// serves (see ensureLocalToken), for a command given no --token-file.
func localTokenOf(ctx context.Context, c control.Client) (string, error) {
	st, err := c.Status(ctx)
	if err != nil {
		return "", err
	}
	path, err := localTokenPath(st.Job)
	if err != nil {
		return "", err
	}
	if err := checkPrivate(path); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("--token-file is missing, and there is no local token of job %q (%s): it changes the job, which needs its token: give the file of the token the job was started with (--token-file FILE)", st.Job, path)
	} else if err != nil {
		return "", err
	}
	return control.LoadToken(path, "")
}

// eventTimeText is where an operator or subtask is in event time, for the
// summary: its watermark (UTC), idle, ended, or "-" without one.
func eventTimeText(e control.EventTime) string {
	switch {
	case e.InputEnded:
		return "input ended"
	case e.Watermark != nil && e.Idle:
		return e.Watermark.UTC().Format(watermarkLayout) + " (idle)"
	case e.Watermark != nil:
		return e.Watermark.UTC().Format(watermarkLayout)
	case e.Idle:
		return "idle"
	}
	return "-"
}

// watermarkLayout formats watermarks: event time may be days behind, so
// the date is shown, to the millisecond.
const watermarkLayout = "2006-01-02 15:04:05.000"

// printStatus prints a summary of st; subtasks adds a line per subtask.
func printStatus(out io.Writer, st control.Status, subtasks bool) {
	if st.Cluster != nil {
		printCluster(out, st)
		return
	}
	fmt.Fprintf(out, "job %s: %s since %s (incarnation %s, epoch %d)\n", st.Job, st.State, st.Started.Format(time.RFC3339), st.Incarnation, st.Epoch)
	if st.Error != "" {
		fmt.Fprintf(out, "error: %s\n", firstLine(st.Error))
	}
	fmt.Fprintf(out, "storage %s", st.Storage)
	if st.RestoredFrom != 0 {
		fmt.Fprintf(out, ", restored from checkpoint %d", st.RestoredFrom)
	}
	fmt.Fprintln(out)
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "OPERATOR\tSUBTASKS\tRECORDS IN\tIN/S\tRECORDS OUT\tOUT/S\tBUSY\tBACKPRESSURED\tWATERMARK")
	for _, op := range st.Operators {
		busy, bp := 0.0, 0.0
		for _, s := range op.Subtasks {
			busy, bp = max(busy, s.Busy), max(bp, s.Backpressured)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%d\t%.0f\t%.0f%%\t%.0f%%\t%s\n", op.Name, len(op.Subtasks), op.RecordsIn, op.InPerSecond, op.RecordsOut, op.OutPerSecond, 100*busy, 100*bp, eventTimeText(op.EventTime))
	}
	_ = tw.Flush()
	if subtasks {
		fmt.Fprintln(out)
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "OPERATOR\tSUBTASK\tTASK\tBUSY\tBACKPRESSURED\tWATERMARK")
		for _, op := range st.Operators {
			for _, s := range op.Subtasks {
				fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f%%\t%.0f%%\t%s\n", op.Name, s.Index, s.Task, 100*s.Busy, 100*s.Backpressured, eventTimeText(s.EventTime))
			}
		}
		_ = tw.Flush()
	}
	cp := st.Checkpoints
	fmt.Fprintf(out, "\ncheckpoints: %d completed, %d aborted in this process\n", cp.Completed, cp.Aborted)
	if n := len(cp.History); n > 0 {
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKIND\tSTATUS\tTRIGGERED\tDURATION\tALIGNMENT\tSIZE\tCOMMITS")
		for _, c := range cp.History[max(0, n-5):] {
			var commits []string
			for _, k := range c.Commits {
				if k.Committed < k.Subtasks {
					commits = append(commits, fmt.Sprintf("%s %d/%d pending", k.Sink, k.Committed, k.Subtasks))
				} else {
					commits = append(commits, fmt.Sprintf("%s %d/%d in %dms", k.Sink, k.Committed, k.Subtasks, k.LatencyMillis))
				}
			}
			status := c.Status
			if c.Reason != "" {
				status += " (" + firstLine(c.Reason) + ")"
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%dms\t%dms\t%d B\t%s\n", c.ID, c.Kind, status, c.Triggered.Format(time.TimeOnly), c.DurationMillis, c.AlignmentMillis, c.StateBytes+c.SharedBytes, strings.Join(commits, ", "))
		}
		_ = tw.Flush()
	}
	for _, p := range cp.Pending {
		fmt.Fprintf(out, "pending commit: sink %s, checkpoint %d, %d subtasks waiting for %dms\n", p.Sink, p.Checkpoint, p.Waiting, p.SinceMillis)
	}
	fmt.Fprintf(out, "\nrestarts: %d\n", len(st.Restarts))
	for _, r := range st.Restarts {
		fmt.Fprintf(out, "  %s restart %d: %s\n", r.Time.Format(time.RFC3339), r.Attempt, firstLine(r.Error))
	}
	if len(st.Lag) > 0 {
		fmt.Fprintln(out, "\nlag:")
		for _, l := range st.Lag {
			fmt.Fprintf(out, "  %s[%d] %s: %d %s\n", l.Source, l.Subtask, l.Split, l.Lag, l.Unit)
		}
	}
}

// firstLine returns s up to its first newline (a panic's stack follows).
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// printCluster prints the status of an instance of a job run on a
// cluster: its tasks, then the group's assignment.
func printCluster(out io.Writer, st control.Status) {
	c := st.Cluster
	fmt.Fprintf(out, "job %s: instance %s of group %s, %s since %s\n", st.Job, c.Member, c.Group, st.State, st.Started.Format(time.RFC3339))
	if st.Error != "" {
		fmt.Fprintf(out, "error: %s\n", firstLine(st.Error))
	}
	fmt.Fprintf(out, "storage %s\n\ntasks of this instance: %d\n", st.Storage, len(c.Tasks))
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTAGE\tSTATE\tSINCE\tEPOCH\tCHECKPOINT\tRUNS\tRESTARTS\tERROR")
	for _, t := range c.Tasks {
		checkpoint := "-"
		if t.Checkpoint > 0 {
			checkpoint = strconv.FormatUint(t.Checkpoint, 10)
			if !t.CheckpointTime.IsZero() {
				checkpoint += " at " + t.CheckpointTime.Format(time.TimeOnly)
			}
		}
		stage := "-"
		if t.Stage >= 0 {
			stage = strconv.Itoa(t.Stage)
		}
		fmt.Fprintf(tw, "%s/%d\t%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\n", t.Topic, t.Partition, stage, t.State, t.Since.Format(time.TimeOnly), t.Epoch, checkpoint, t.Runs, t.Restarts, firstLine(t.Error))
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "\ngroup assignment (%d members", len(c.Assignment))
	if !c.AssignmentTime.IsZero() {
		fmt.Fprintf(out, ", as of %s", c.AssignmentTime.Format(time.TimeOnly))
	}
	fmt.Fprintln(out, "):")
	if c.AssignmentError != "" {
		fmt.Fprintf(out, "  the broker did not describe the group: %s\n", firstLine(c.AssignmentError))
	}
	for _, m := range c.Assignment {
		self := ""
		if m.Member == c.Member {
			self = " (this instance)"
		}
		fmt.Fprintf(out, "  %s%s, client %s at %s: %d tasks\n", m.Member, self, m.Client, m.Host, len(m.Tasks))
		for _, t := range m.Tasks {
			fmt.Fprintf(out, "    %s\n", t)
		}
	}
}
