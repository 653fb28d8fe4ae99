package runtime

import (
	"fmt"
	"strconv"

	"github.com/exactlyonce/exactly/control"
)

// configuration returns the job's options that shape its run, with their
// values as the job runs them (defaults filled in), for the status. No
// secret is among them: of the control token only whether one is set.
func (j *Job) configuration() []control.Setting {
	o := &j.opts
	text := func(v any) string { return fmt.Sprint(v) }
	token := "none: the API changes nothing"
	if o.Control.TokenFile != "" || o.Control.TokenEnv != "" {
		token = "set"
	}
	restoreFrom := o.RestoreFrom
	if restoreFrom == "" {
		restoreFrom = "none"
	}
	return []control.Setting{
		{Name: "checkpoint storage", Value: j.store.Location()},
		{Name: "checkpoint interval", Value: text(o.CheckpointInterval)},
		{Name: "checkpoint timeout", Value: text(o.CheckpointTimeout)},
		{Name: "min pause between checkpoints", Value: text(o.MinPauseBetweenCheckpoints)},
		{Name: "checkpoint on caught up", Value: text(o.CheckpointOnCaughtUp)},
		{Name: "retained checkpoints", Value: strconv.Itoa(o.RetainedCheckpoints)},
		{Name: "tolerable checkpoint failures", Value: strconv.Itoa(o.TolerableCheckpointFailures)},
		{Name: "parallelism (default)", Value: strconv.Itoa(o.Parallelism)},
		{Name: "max parallelism (key groups)", Value: strconv.Itoa(o.MaxParallelism)},
		{Name: "restart: max attempts", Value: strconv.Itoa(o.Restart.MaxAttempts)},
		{Name: "restart: backoff", Value: fmt.Sprintf("%v to %v", o.Restart.InitialBackoff, o.Restart.MaxBackoff)},
		{Name: "restore from", Value: restoreFrom},
		{Name: "run finished", Value: strconv.FormatBool(o.RunFinished)},
		{Name: "take over sinks", Value: strconv.FormatBool(o.TakeOverSinks)},
		{Name: "skip corrupt checkpoints", Value: strconv.FormatBool(o.SkipCorruptCheckpoints)},
		{Name: "ownership lease", Value: text(o.OwnershipLease)},
		{Name: "commit retries", Value: strconv.Itoa(o.CommitRetries)},
		{Name: "commit timeout", Value: text(o.CommitTimeout)},
		{Name: "storage request timeout", Value: text(o.StorageRequestTimeout)},
		{Name: "storage min transfer rate", Value: fmt.Sprintf("%.1f MiB/s", float64(o.StorageMinTransferRate)/(1<<20))},
		{Name: "batch size", Value: strconv.Itoa(o.BatchSize)},
		{Name: "channel capacity", Value: strconv.Itoa(o.ChannelCapacity)},
		{Name: "debloat target", Value: text(o.DebloatTarget)},
		{Name: "watermark interval", Value: text(o.WatermarkInterval)},
		{Name: "control API", Value: o.Control.Addr},
		{Name: "control token", Value: token},
	}
}
