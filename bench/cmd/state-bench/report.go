package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

// row is one completed checkpoint as the benchmark saw it.
type row struct {
	// ID is the checkpoint's id.
	ID uint64
	// At is when the benchmark saw it complete, from the start of the run.
	At time.Duration
	// Records is the number of events the keyed operator had handled then.
	Records int64
	// StateBytes is the checkpoint's whole size: every file it refers to.
	StateBytes int64
	// UploadedBytes is what the checkpoint wrote to the storage.
	UploadedBytes int64
	// Duration is its time from trigger to completion.
	Duration time.Duration
	// RSS and PeakRSS are the process's resident memory then (VmRSS,
	// VmHWM), in bytes.
	RSS, PeakRSS int64
}

// report collects the rows of a run and prints them.
type report struct {
	out io.Writer
	// valueBytes is the size of the value every event writes.
	valueBytes int
	// events is the number of events of the run: an interval at whose end
	// all were handled is left out of the rates, as it ended idle.
	events int64
	rows   []row
}

const (
	mib = 1 << 20
	gib = 1 << 30
)

// header prints the column names of the per-checkpoint lines.
func (r *report) header() {
	fmt.Fprintf(r.out, "%6s %8s %12s %10s %10s %10s %10s %9s %8s %8s\n",
		"ckpt", "time", "events", "events/s", "state", "changed", "uploaded", "duration", "RSS", "peak")
}

// add records a row and prints its line: the throughput and the changed
// state (the values written, ValueBytes per event, an upper bound of the
// state that changed) since the previous row.
func (r *report) add(c row) {
	var prev row
	if len(r.rows) > 0 {
		prev = r.rows[len(r.rows)-1]
	}
	r.rows = append(r.rows, c)
	rate := float64(c.Records-prev.Records) / (c.At - prev.At).Seconds()
	fmt.Fprintf(r.out, "%6d %8s %12d %10.0f %10s %10s %10s %9s %8s %8s\n",
		c.ID, c.At.Round(100*time.Millisecond), c.Records, rate, bytesStr(c.StateBytes),
		bytesStr((c.Records-prev.Records)*int64(r.valueBytes)), bytesStr(c.UploadedBytes),
		c.Duration.Round(10*time.Millisecond), bytesStr(c.RSS), bytesStr(c.PeakRSS))
}

// bucket summarizes the checkpoints of one range of state sizes.
type bucket struct {
	// From and To bound the checkpoints' state size: [From, To) bytes.
	From, To int64
	// Checkpoints is the number of checkpoints in the range.
	Checkpoints int
	// Rate is the events per second over the intervals that ended at them
	// before the input did; 0 if none did.
	Rate float64
	// MedianDuration and MaxDuration are of their durations.
	MedianDuration, MaxDuration time.Duration
	// Changed and Uploaded are the mean changed and uploaded bytes per
	// checkpoint, State its mean size.
	Changed, Uploaded, State int64
	// PeakRSS is the highest peak RSS seen at them.
	PeakRSS int64
}

// buckets groups the rows after the first by the state size they reached,
// in steps of step bytes, smallest first (the first checkpoint uploads the
// whole state and has no previous one to take a rate from).
func (r *report) buckets(step int64) []bucket {
	type acc struct {
		bucket
		events    int64
		elapsed   time.Duration
		durations []time.Duration
	}
	byFrom := map[int64]*acc{}
	for i := 1; i < len(r.rows); i++ {
		c, prev := r.rows[i], r.rows[i-1]
		from := c.StateBytes / step * step
		a := byFrom[from]
		if a == nil {
			a = &acc{bucket: bucket{From: from, To: from + step}}
			byFrom[from] = a
		}
		a.Checkpoints++
		a.Changed += (c.Records - prev.Records) * int64(r.valueBytes)
		a.Uploaded += c.UploadedBytes
		a.State += c.StateBytes
		a.PeakRSS = max(a.PeakRSS, c.PeakRSS)
		if c.Records < r.events {
			a.events += c.Records - prev.Records
			a.elapsed += c.At - prev.At
		}
		a.durations = append(a.durations, c.Duration)
	}
	var out []bucket
	for _, from := range slices.Sorted(maps.Keys(byFrom)) {
		a := byFrom[from]
		slices.Sort(a.durations)
		if a.elapsed > 0 {
			a.Rate = float64(a.events) / a.elapsed.Seconds()
		}
		a.MedianDuration = a.durations[len(a.durations)/2]
		a.MaxDuration = a.durations[len(a.durations)-1]
		a.Changed /= int64(a.Checkpoints)
		a.Uploaded /= int64(a.Checkpoints)
		a.State /= int64(a.Checkpoints)
		out = append(out, a.bucket)
	}
	return out
}

// summary prints the buckets as a Markdown table.
func (r *report) summary(step int64) {
	fmt.Fprintln(r.out, "\n| state | checkpoints | events/s | checkpoint duration (median, max) | changed per checkpoint | uploaded per checkpoint | uploaded / changed | uploaded / state | peak RSS |")
	fmt.Fprintln(r.out, "|---|---|---|---|---|---|---|---|---|")
	for _, b := range r.buckets(step) {
		fmt.Fprintf(r.out, "| %s–%s | %d | %s | %s, %s | %s | %s | %s | %s | %s |\n",
			bytesStr(b.From), bytesStr(b.To), b.Checkpoints, rateStr(b.Rate),
			b.MedianDuration.Round(10*time.Millisecond), b.MaxDuration.Round(10*time.Millisecond),
			bytesStr(b.Changed), bytesStr(b.Uploaded), ratioStr(b.Uploaded, b.Changed), ratioStr(b.Uploaded, b.State), bytesStr(b.PeakRSS))
	}
}

// ratioStr formats a/b, n/a when b is 0.
func ratioStr(a, b int64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f", float64(a)/float64(b))
}

// bytesStr formats n bytes in KiB, MiB or GiB.
func bytesStr(n int64) string {
	switch {
	case n >= gib:
		return strings.TrimSuffix(fmt.Sprintf("%.2f", float64(n)/gib), ".00") + " GiB"
	case n >= mib:
		return fmt.Sprintf("%.0f MiB", float64(n)/mib)
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// rateStr formats events per second.
func rateStr(r float64) string {
	switch {
	case r == 0:
		return "n/a"
	case r >= 1e6:
		return fmt.Sprintf("%.2f M", r/1e6)
	case r >= 1e3:
		return fmt.Sprintf("%.1f k", r/1e3)
	}
	return fmt.Sprintf("%.0f", r)
}
