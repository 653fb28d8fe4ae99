package store

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// ErrCorruptCompleted is wrapped by Latest's error when a completed
// checkpoint does not verify and Options.SkipCorruptCheckpoints is off:
// besides restoring the files from a backup, the user may skip it
// (accepting duplicates) or start from a savepoint.
var ErrCorruptCompleted = errors.New("a completed checkpoint does not verify")

// candidate is a checkpoint or savepoint that Latest may restore.
type candidate struct {
	id   checkpoint.ID
	kind checkpoint.Kind
}

// latestRules is the recovery choice both stores share: which candidate
// Latest returns, given how to load one.
type latestRules struct {
	where       string        // the directory or URL, for messages
	completed   checkpoint.ID // the highest id that ever completed, as recorded
	skipCorrupt bool
	log         *slog.Logger
	skipped     *atomic.Int64
	// neverCompleted reports whether c is the trace of a crash before it
	// completed, to be skipped quietly.
	neverCompleted func(c candidate) bool
	// load reads and fully validates c.
	load func(c candidate) (*checkpoint.Metadata, error)
}

// pick returns the newest candidate that loads, applying the corruption
// rules documented on [Store.Latest].
func (r latestRules) pick(all []candidate) (*checkpoint.Metadata, error) {
	slices.SortFunc(all, func(a, b candidate) int { return cmp.Compare(b.id, a.id) })
	var skipped []string
	for _, c := range all {
		if r.neverCompleted(c) {
			r.log.Info("checkpoint/store: skipping a checkpoint that never completed", "id", c.id, "kind", c.kind, "where", r.where)
			continue
		}
		m, err := r.load(c)
		ce, corrupt := errors.AsType[*format.CorruptFileError](err)
		if !corrupt {
			return m, err
		}
		if !r.skipCorrupt {
			return nil, fmt.Errorf("%w. %s %d completed (its metadata was written), so sinks may have committed its output, and falling back to an older checkpoint would write that output again (%w). "+
				"Restore the file from a backup and start again",
				err, c.kind, c.id, ErrCorruptCompleted)
		}
		r.skipped.Add(1)
		skipped = append(skipped, fmt.Sprint(c.id))
		r.log.Warn("checkpoint/store: SKIPPING A CORRUPT COMPLETED CHECKPOINT (skipping corrupt checkpoints is on): output committed after the checkpoint restored will be written again",
			"id", c.id, "kind", c.kind, "file", ce.Path, "problem", ce.Problem)
	}
	if r.completed > 0 {
		if !r.skipCorrupt {
			return nil, fmt.Errorf("checkpoint/store: %s: %w: completed checkpoints up to id %d were recorded, but it holds no valid one (skipped: [%s]); starting from scratch would write all output again (%w). "+
				"Restore the checkpoints from a backup",
				r.where, ErrCorrupt, r.completed, strings.Join(skipped, " "), ErrCorruptCompleted)
		}
		r.log.Warn("checkpoint/store: NO VALID CHECKPOINT LEFT (skipping corrupt checkpoints is on): starting from scratch; all output will be written again",
			"where", r.where, "last_completed", r.completed)
	}
	return nil, nil
}
