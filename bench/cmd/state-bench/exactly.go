package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/exactlyonce/exactly/bench/internal/procstat"
	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// pollEvery is how often the benchmark reads the job's metrics and RSS.
const pollEvery = 50 * time.Millisecond

// runExactly runs the job on exactly, then the restore and the download
// that c asks for, and deletes what the runs wrote when c.cleanup.
func runExactly(ctx context.Context, c config) (err error) {
	stateDir := filepath.Join(c.dir, "state")
	restoreDir := filepath.Join(c.dir, "state-restored")
	if c.cleanup {
		defer func() {
			for _, d := range []string{stateDir, restoreDir} {
				err = errors.Join(err, os.RemoveAll(d))
			}
			err = errors.Join(err, removeCheckpoints(context.Background(), c.checkpoints))
		}()
	}
	jc := jobConfig{Backend: c.backend, StateDir: stateDir, MemoryBudget: c.budget(), Downloads: c.downloads, Parallelism: c.parallelism, Rate: c.rate, Events: c.work.events(), Timers: c.timers}
	if c.processMiB > 0 {
		if jc.Memory, err = state.NewMemory(c.processMiB << 20); err != nil {
			return err
		}
		jc.MemoryBudget = 0
	}
	if c.restoreOnly {
		if err := measureRestore(ctx, c, jc, restoreDir); err != nil {
			return err
		}
		if c.download {
			return measureDownload(ctx, c.checkpoints, c.dir)
		}
		return nil
	}
	if err := checkEmpty(ctx, c.checkpoints); err != nil {
		return err
	}
	rep := &report{out: os.Stdout, valueBytes: c.work.ValueBytes, events: int64(c.work.events())}
	rep.header()
	start := time.Now()
	var seen checkpoint.ID
	if err := runJob(ctx, c, jc, nil, func(m *stream.Metrics, mem procstat.Memory) bool {
		if last := m.LastCheckpoint.Load(); last != nil && last.ID != seen {
			seen = last.ID
			rep.add(row{ID: uint64(last.ID), At: time.Since(start), Records: m.Records(keyedOp),
				StateBytes: last.StateBytes + last.SharedBytes, UploadedBytes: last.UploadedBytes,
				Duration: last.Completed.Sub(last.Triggered), RSS: mem.RSS, PeakRSS: mem.Peak})
		}
		return false
	}); err != nil {
		return err
	}
	elapsed := time.Since(start)
	mem, err := procstat.ReadMemory(os.Getpid())
	if err != nil {
		return err
	}
	fmt.Printf("\nrun: %d events in %v: %s events/s; peak RSS %s\n", c.work.events(), elapsed.Round(time.Millisecond),
		rateStr(float64(c.work.events())/elapsed.Seconds()), bytesStr(mem.Peak))
	rep.summary(int64(c.bucketGB * gib))
	if c.restore {
		if err := measureRestore(ctx, c, jc, restoreDir); err != nil {
			return err
		}
	}
	if c.download {
		return measureDownload(ctx, c.checkpoints, c.dir)
	}
	return nil
}

// errEnough stops a job whose measurement is done.
var errEnough = errors.New("measured")

// runJob runs the job with jc until it ends or onPoll returns true,
// calling onPoll with its metrics and the process's memory every
// pollEvery and once at the end; it fails the job when the process's RSS
// exceeds the cap. started, when set, is set to when Job.Start returned
// (it takes the storage over and reads the checkpoint to restore).
func runJob(ctx context.Context, c config, jc jobConfig, started *time.Time, onPoll func(*stream.Metrics, procstat.Memory) bool) error {
	j, err := buildJob(c.work, jc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r, err := j.Start(ctx, stream.Options{
		CheckpointDir:       c.checkpoints,
		CheckpointInterval:  c.interval,
		CheckpointTimeout:   30 * time.Minute,
		RetainedCheckpoints: 1,
		RunFinished:         true,
		Restart:             stream.RestartStrategy{MaxAttempts: -1},
		Logger:              slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		return err
	}
	if started != nil {
		*started = time.Now()
	}
	done := make(chan error, 1)
	go func() { done <- r.Wait() }()
	tick := time.NewTicker(pollEvery)
	defer tick.Stop()
	for {
		var ended bool
		select {
		case err := <-done:
			if cause := context.Cause(ctx); cause != nil && err != nil {
				err = cause
			}
			if err != nil && !errors.Is(err, errEnough) {
				return err
			}
			ended = true
		case <-tick.C:
		}
		mem, err := procstat.ReadMemory(os.Getpid())
		if err != nil {
			return err
		}
		if capped := c.rssCapMiB << 20; capped > 0 && mem.RSS > capped {
			cancel(fmt.Errorf("RSS %s exceeds --rss-cap-mib %d", bytesStr(mem.RSS), c.rssCapMiB))
		}
		if onPoll(r.Metrics(), mem) {
			cancel(errEnough)
		}
		if ended {
			return nil
		}
	}
}

// restoreEvents is how many events the restored job handles after the
// last checkpoint: the first events of the workload's continuation, which
// reach every subtask only once all restored.
const restoreEvents = 10_000

// measureRestore starts the job again from its last checkpoint with an
// empty state directory and restoreEvents more input, and reports the
// time until the keyed operator handled restoreEvents (every subtask then
// has restored), against the size of the checkpoint it restored; then it
// stops the job. The checkpoint may be the final one of a run, or any
// (--restore-only, after a run stopped by SIGKILL).
func measureRestore(ctx context.Context, c config, jc jobConfig, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	settle()
	jc.StateDir = dir
	jc.Events += restoreEvents
	c.rssCapMiB = 0 // the cap is the run's; the restore reports its own peak
	peakReset := procstat.ResetPeak(os.Getpid()) == nil
	var restored *stream.CheckpointStats
	var at time.Duration
	var mem procstat.Memory
	var started time.Time
	start := time.Now()
	err := runJob(ctx, c, jc, &started, func(m *stream.Metrics, now procstat.Memory) bool {
		if restored == nil {
			restored = m.LastCheckpoint.Load()
		}
		if at == 0 && m.Records(keyedOp) >= restoreEvents {
			at, mem = time.Since(start), now
		}
		return at != 0 // the rest of the run does not matter
	})
	if err != nil {
		return err
	}
	if restored == nil || at == 0 {
		return fmt.Errorf("restore: the job restored no checkpoint or did not handle its %d events", restoreEvents)
	}
	size := restored.StateBytes + restored.SharedBytes
	peak := "peak RSS " + bytesStr(mem.Peak)
	if !peakReset {
		peak += " (of the whole process: VmHWM could not be reset)"
	}
	opening := started.Sub(start)
	fmt.Printf("\nrestore: checkpoint %d, %s, from %s into an empty directory: %v until every subtask handled records, %.1f MB/s (of which Job.Start, the takeover and the checkpoint's metadata: %v; without it %.1f MB/s); %s\n",
		restored.ID, bytesStr(size), c.checkpoints, at.Round(time.Millisecond), float64(size)/1e6/at.Seconds(),
		opening.Round(time.Millisecond), float64(size)/1e6/(at-opening).Seconds(), peak)
	return nil
}

// isS3 reports whether location is an object-storage URL.
func isS3(location string) bool { return strings.HasPrefix(location, "s3://") }
