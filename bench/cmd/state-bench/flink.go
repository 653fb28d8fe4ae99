package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/exactlyonce/exactly/bench/internal/procstat"
)

// runFlink builds the Flink peer, runs the same job on it and reports its
// checkpoints from the MiniCluster's REST API, as runExactly does.
func runFlink(ctx context.Context, c config) (err error) {
	rocksDir := filepath.Join(c.dir, "flink-rocksdb")
	if c.cleanup {
		defer func() {
			err = errors.Join(err, os.RemoveAll(rocksDir), os.RemoveAll(c.checkpoints))
		}()
	}
	if err := checkEmpty(ctx, c.checkpoints); err != nil {
		return err
	}
	mvn := exec.CommandContext(ctx, "mvn", "-q", "-B", "-Dstyle.color=never", "-f", "bench/peers/pom.xml", "-pl", "flink", "-am", "package")
	mvn.Stdout, mvn.Stderr = os.Stderr, os.Stderr
	if err := mvn.Run(); err != nil {
		return fmt.Errorf("building the Flink peer (run from the repository's root): %w", err)
	}
	target := filepath.Join("bench", "peers", "flink", "target")
	logPath := filepath.Join(c.dir, "flink.log")
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command("java", "-Xmx"+c.flinkHeap, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", filepath.Join(target, "classes")+string(os.PathListSeparator)+filepath.Join(target, "lib", "*"),
		"exactly.bench.flink.StateBench",
		"--keys", strconv.FormatUint(c.work.Keys, 10), "--updates-per-insert", strconv.FormatUint(c.work.UpdatesPerInsert, 10),
		"--value-bytes", strconv.Itoa(c.work.ValueBytes), "--parallelism", strconv.Itoa(c.parallelism),
		"--interval-ms", strconv.FormatInt(c.interval.Milliseconds(), 10), "--checkpoints", c.checkpoints,
		"--rocksdb-dir", rocksDir, "--rest-port", strconv.Itoa(c.flinkPort))
	cmd.Stdout, cmd.Stderr = log, log
	if c.rate != 0 {
		return fmt.Errorf("--rate: the Flink peer runs as fast as possible only")
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Signal(syscall.SIGKILL)
			<-done
		}
	}()
	rest := flinkREST{base: fmt.Sprintf("http://127.0.0.1:%d", c.flinkPort), cl: &http.Client{Timeout: 5 * time.Second}}
	rep := &report{out: os.Stdout, valueBytes: c.work.ValueBytes, events: int64(c.work.events())}
	rep.header()
	var seen uint64
	var peak int64
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			done <- err // for the deferred kill
			if err != nil {
				return fmt.Errorf("the Flink peer failed: %w (log: %s)", err, logPath)
			}
			elapsed := time.Since(start)
			fmt.Printf("\nrun: %d events in %v (JVM start included): %s events/s; peak RSS %s\n", c.work.events(), elapsed.Round(time.Millisecond),
				rateStr(float64(c.work.events())/elapsed.Seconds()), bytesStr(peak))
			rep.summary(int64(c.bucketGB * gib))
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		mem, err := procstat.ReadMemory(cmd.Process.Pid)
		if err != nil {
			continue // exiting
		}
		peak = max(peak, mem.Peak)
		if capped := c.rssCapMiB << 20; capped > 0 && mem.RSS > capped {
			return fmt.Errorf("RSS %s exceeds --rss-cap-mib %d", bytesStr(mem.RSS), c.rssCapMiB)
		}
		cks, records, err := rest.poll()
		if err != nil {
			continue // not up yet, or shutting down
		}
		for _, ck := range cks {
			if ck.ID <= seen || ck.Status != "COMPLETED" {
				continue
			}
			seen = ck.ID
			rep.add(row{ID: ck.ID, At: time.Since(start), Records: records, StateBytes: ck.StateSize,
				UploadedBytes: ck.CheckpointedSize, Duration: time.Duration(ck.EndToEnd) * time.Millisecond,
				RSS: mem.RSS, PeakRSS: mem.Peak})
		}
	}
}

// flinkREST reads a MiniCluster's REST API.
type flinkREST struct {
	base string
	cl   *http.Client
	job  string // the job's id, once known
}

// flinkCheckpoint is one entry of /jobs/<id>/checkpoints' history.
type flinkCheckpoint struct {
	ID               uint64 `json:"id"`
	Status           string `json:"status"`
	StateSize        int64  `json:"state_size"`        // the whole checkpoint
	CheckpointedSize int64  `json:"checkpointed_size"` // what it uploaded
	EndToEnd         int64  `json:"end_to_end_duration"`
}

// poll returns the job's recent checkpoints, oldest first, and the records
// its keyed operator ("state") has read.
func (f *flinkREST) poll() ([]flinkCheckpoint, int64, error) {
	if f.job == "" {
		var overview struct {
			Jobs []struct {
				ID string `json:"jid"`
			} `json:"jobs"`
		}
		if err := f.get("/jobs/overview", &overview); err != nil {
			return nil, 0, err
		}
		if len(overview.Jobs) == 0 {
			return nil, 0, fmt.Errorf("no job yet")
		}
		f.job = overview.Jobs[0].ID
	}
	var job flinkJob
	if err := f.get("/jobs/"+f.job, &job); err != nil {
		return nil, 0, err
	}
	var cks struct {
		History []flinkCheckpoint `json:"history"`
	}
	if err := f.get("/jobs/"+f.job+"/checkpoints", &cks); err != nil {
		return nil, 0, err
	}
	slices.SortFunc(cks.History, func(a, b flinkCheckpoint) int { return cmp.Compare(a.ID, b.ID) })
	return cks.History, job.records(keyedOp), nil
}

// flinkJob is the part of /jobs/<id> the benchmark reads.
type flinkJob struct {
	Vertices []struct {
		Name    string `json:"name"`
		Metrics struct {
			ReadRecords int64 `json:"read-records"`
		} `json:"metrics"`
	} `json:"vertices"`
}

// records returns the records read by the vertex that holds operator
// (chained operators share a vertex, named after all of them).
func (j flinkJob) records(operator string) int64 {
	for _, v := range j.Vertices {
		if slices.Contains(strings.FieldsFunc(v.Name, func(r rune) bool { return r == ' ' || r == '>' || r == '-' || r == ':' }), operator) {
			return v.Metrics.ReadRecords
		}
	}
	return 0
}

func (f *flinkREST) get(path string, v any) error {
	resp, err := f.cl.Get(f.base + path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}
