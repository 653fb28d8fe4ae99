package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/cmd/exactly/internal/inspect"
)

const checkpointsUsage = `Usage: exactly checkpoints ls [flags] DIR_OR_URL
       exactly checkpoints inspect [flags] DIR_OR_URL

Reads a job's checkpoint storage offline (a directory, or an s3:// URL with
the credentials of the standard AWS variables), and changes nothing in it.

  ls       lists the completed checkpoints and savepoints
  inspect  tells what one holds: sources' positions, operators' state sizes
           per key group, sinks' pending committables. DIR_OR_URL is the
           storage (then the latest checkpoint, or --id N) or a chk-… or
           sp-… directory in it.

Flags:
`

// runCheckpoints runs `exactly checkpoints ls|inspect`.
func runCheckpoints(args []string, out io.Writer) error {
	if len(args) == 0 || (args[0] != "ls" && args[0] != "inspect" && !strings.HasPrefix(args[0], "-")) {
		what := "nothing"
		if len(args) > 0 {
			what = strconv.Quote(args[0])
		}
		return fmt.Errorf("checkpoints: the subcommand is %s: use 'exactly checkpoints ls DIR' or 'exactly checkpoints inspect DIR'", what)
	}
	sub := "ls"
	if !strings.HasPrefix(args[0], "-") {
		sub, args = args[0], args[1:]
	}
	fs := flag.NewFlagSet("checkpoints", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	var id checkpoint.ID
	fs.Func("id", "inspect: the checkpoint or savepoint id (default: the latest)", func(s string) error {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil || v == 0 {
			return fmt.Errorf("not a checkpoint id: use a positive number, such as --id 12 (see 'exactly checkpoints ls')")
		}
		id = checkpoint.ID(v)
		return nil
	})
	// The location comes first or last: flags may follow it.
	var location string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		location, args = args[0], args[1:]
	}
	if err := parseFlags(fs, checkpointsUsage, args, out); err != nil {
		return err
	}
	if location == "" {
		return fmt.Errorf("checkpoints %s: DIR_OR_URL is missing: give the job's checkpoint directory or s3:// URL, such as 'exactly checkpoints %s /var/lib/orders/checkpoints'", sub, sub)
	}
	st, dir, err := inspect.Open(location)
	if err != nil {
		return fmt.Errorf("checkpoints %s: %w", sub, err)
	}
	if sub == "ls" {
		if dir != "" {
			return fmt.Errorf("checkpoints ls: %s is one checkpoint: list its storage (the directory above it), or inspect it", location)
		}
		list, err := inspect.List(st)
		if err != nil {
			return fmt.Errorf("checkpoints ls: %w", err)
		}
		if *asJSON {
			return printJSON(out, list)
		}
		printList(out, list)
		return nil
	}
	if dir == "" {
		if dir, err = inspect.Find(st, id); err != nil {
			return fmt.Errorf("checkpoints inspect: %w", err)
		}
	} else if id != 0 {
		return fmt.Errorf("checkpoints inspect: --id %d with %s, which is one checkpoint already: give one or the other", id, location)
	}
	r, err := inspect.Describe(st, dir)
	if err != nil {
		return fmt.Errorf("checkpoints inspect: %w", err)
	}
	if *asJSON {
		return printJSON(out, r)
	}
	printReport(out, r)
	return nil
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printList(out io.Writer, list []inspect.Summary) {
	if len(list) == 0 {
		fmt.Fprintln(out, "no completed checkpoint")
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tJOB\tCOMPLETED\tDURATION\tSTATE\tOPERATORS\tFINAL\tDIR")
	for _, s := range list {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%v\t%d B\t%d\t%v\t%s\n", s.ID, s.Kind, s.Job, s.Completed.Format(time.RFC3339), s.Completed.Sub(s.Triggered).Round(time.Millisecond), s.StateBytes, s.Operators, s.EndOfInput, s.Dir)
	}
	_ = tw.Flush()
}

func printReport(out io.Writer, r *inspect.Report) {
	fmt.Fprintf(out, "%s %d of job %s (incarnation %s, epoch %d)\n", r.Kind, r.ID, r.Job, r.Incarnation, r.Epoch)
	fmt.Fprintf(out, "triggered %s, completed %s; max parallelism %d; state %d B", r.Triggered.Format(time.RFC3339Nano), r.Completed.Format(time.RFC3339Nano), r.MaxParallelism, r.StateBytes)
	if r.EndOfInput {
		fmt.Fprint(out, "; the final checkpoint of a bounded input")
	}
	fmt.Fprintf(out, "\n%s\n", r.Dir)
	for _, op := range r.Operators {
		fmt.Fprintf(out, "\noperator %s (parallelism %d)\n", op.Name, op.Parallelism)
		for _, s := range op.Subtasks {
			fmt.Fprintf(out, "  subtask %d: %s, %d B", s.Subtask, s.File, s.Size)
			if s.KeyGroupEnd > s.KeyGroupStart {
				fmt.Fprintf(out, ", key groups [%d, %d)", s.KeyGroupStart, s.KeyGroupEnd)
			}
			fmt.Fprintln(out)
			if len(s.KeyGroupBytes) > 0 {
				kgs := slices.Sorted(func(yield func(int) bool) {
					for kg := range s.KeyGroupBytes {
						if !yield(kg) {
							return
						}
					}
				})
				var parts []string
				for _, kg := range kgs {
					parts = append(parts, fmt.Sprintf("%d:%d", kg, s.KeyGroupBytes[kg]))
				}
				fmt.Fprintf(out, "    state bytes per key group (%d groups): %s\n", len(kgs), strings.Join(parts, " "))
			}
			for _, db := range s.DBs {
				fmt.Fprintf(out, "    database of key groups [%d, %d): %d files, %d B\n", db.KeyGroupStart, db.KeyGroupEnd, db.Files, db.Bytes)
			}
			for _, p := range s.Positions {
				fmt.Fprintf(out, "    position of split %s: %s", p.Split, p.Pos)
				if p.Uvarint != nil {
					fmt.Fprintf(out, " (%d)", *p.Uvarint)
				}
				if p.Done {
					fmt.Fprint(out, ", done")
				}
				fmt.Fprintln(out)
			}
			for _, c := range s.Committables {
				fmt.Fprintf(out, "    pending committable: checkpoint %d, subtask %d, %d B\n", c.Checkpoint, c.Subtask, c.DataBytes)
			}
			switch {
			case s.Watermark == nil:
			case *s.Watermark == math.MaxInt64:
				fmt.Fprintln(out, "    watermark: the end of event time (the input ended)")
			default:
				fmt.Fprintf(out, "    watermark %s\n", time.Unix(0, *s.Watermark).UTC().Format(time.RFC3339Nano))
			}
			if s.OtherEntries > 0 {
				fmt.Fprintf(out, "    %d other entries\n", s.OtherEntries)
			}
		}
	}
}
