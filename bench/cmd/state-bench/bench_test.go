package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestWorkload(t *testing.T) {
	w := workload{Keys: 1000, UpdatesPerInsert: 3, ValueBytes: 20, Seed: 1}
	if w.events() != 4000 {
		t.Fatalf("events = %d, want 4000", w.events())
	}
	for i := range w.events() {
		e := w.at(i)
		n := i / 4
		if i%4 == 0 && e.Key != n || e.Key > n || e.Seq != i {
			t.Fatalf("event %d = %+v: want key %d for an insert, else at most %d", i, e, n, n)
		}
		if w.at(i) != e {
			t.Fatalf("event %d is not deterministic", i)
		}
	}
	v := w.value(event{Key: 7, Seq: 9}, 5)
	if len(v) != 20 || binary.LittleEndian.Uint64(v) != 5 || !bytes.Equal(v, w.value(event{Key: 7, Seq: 9}, 5)) {
		t.Errorf("value = %x: want 20 deterministic bytes led by the write count 5", v)
	}
	if bytes.Equal(v[8:], w.value(event{Key: 7, Seq: 10}, 5)[8:]) {
		t.Error("two writes of a key wrote the same random bytes")
	}
}

func TestReport(t *testing.T) {
	var out strings.Builder
	r := &report{out: &out, valueBytes: 1024, events: 3500_000}
	r.header()
	for i, c := range []struct {
		at      time.Duration
		records int64
		size    int64
		up      int64
		d       time.Duration
	}{
		{10 * time.Second, 1000_000, 900 * mib, 900 * mib, 3 * time.Second},
		{20 * time.Second, 2000_000, 1500 * mib, 100 * mib, time.Second},
		{30 * time.Second, 2500_000, 1900 * mib, 200 * mib, 2 * time.Second},
		{40 * time.Second, 3500_000, 2100 * mib, 300 * mib, 5 * time.Second},
	} {
		r.add(row{ID: uint64(i + 1), At: c.at, Records: c.records, StateBytes: c.size, UploadedBytes: c.up, Duration: c.d, RSS: 100 * mib, PeakRSS: int64(i+1) * 100 * mib})
	}
	b := r.buckets(gib)
	want := []bucket{
		{From: gib, To: 2 * gib, Checkpoints: 2, Rate: 75_000, MedianDuration: 2 * time.Second, MaxDuration: 2 * time.Second,
			Changed: 750_000 * 1024, Uploaded: 150 * mib, State: 1700 * mib, PeakRSS: 300 * mib},
		{From: 2 * gib, To: 3 * gib, Checkpoints: 1, Rate: 0, MedianDuration: 5 * time.Second, MaxDuration: 5 * time.Second,
			Changed: 1000_000 * 1024, Uploaded: 300 * mib, State: 2100 * mib, PeakRSS: 400 * mib},
	}
	if len(b) != len(want) || b[0] != want[0] || b[1] != want[1] {
		t.Errorf("buckets:\n got %+v\nwant %+v", b, want)
	}
	r.summary(gib)
	for _, line := range []string{
		"     2      20s      2000000     100000   1.46 GiB    977 MiB    100 MiB        1s  100 MiB  200 MiB",
		"| 1 GiB–2 GiB | 2 | 75.0 k | 2s, 2s | 732 MiB | 150 MiB | 0.20 | 0.09 | 300 MiB |",
		"| 2 GiB–3 GiB | 1 | n/a | 5s, 5s | 977 MiB | 300 MiB | 0.31 | 0.14 | 400 MiB |", // the input ended in its interval
	} {
		if !strings.Contains(out.String(), line+"\n") {
			t.Errorf("output lacks %q:\n%s", line, out.String())
		}
	}
}

func TestFlinkREST(t *testing.T) {
	var job flinkJob
	if err := json.Unmarshal([]byte(`{"jid":"x","vertices":[
		{"name":"Source: events","metrics":{"read-records":0,"write-records":90}},
		{"name":"state -> Sink: discard","metrics":{"read-records":80,"write-records":0}}]}`), &job); err != nil {
		t.Fatal(err)
	}
	if n := job.records("state"); n != 80 {
		t.Errorf("records(state) = %d, want 80", n)
	}
	var cks struct {
		History []flinkCheckpoint `json:"history"`
	}
	if err := json.Unmarshal([]byte(`{"counts":{},"history":[{"className":".CompletedCheckpointStatistics","id":4,"status":"COMPLETED",
		"is_savepoint":false,"trigger_timestamp":1,"latest_ack_timestamp":2,"checkpointed_size":1200,"state_size":50000,
		"end_to_end_duration":731}]}`), &cks); err != nil {
		t.Fatal(err)
	}
	if want := (flinkCheckpoint{ID: 4, Status: "COMPLETED", StateSize: 50000, CheckpointedSize: 1200, EndToEnd: 731}); len(cks.History) != 1 || cks.History[0] != want {
		t.Errorf("history %+v, want [%+v]", cks.History, want)
	}
}

func TestValidate(t *testing.T) {
	c := config{system: "exactly", backend: "pebble", stateGB: 1, parallelism: 2, interval: time.Second, bucketGB: 1, dir: "d"}
	c.work.ValueBytes = 1024
	if err := c.validate(); err != nil || c.work.Keys != 1<<20 || c.checkpoints != "d/checkpoints" {
		t.Errorf("validate: %v, %d keys, checkpoints %q", err, c.work.Keys, c.checkpoints)
	}
	for _, bad := range []func(*config){
		func(c *config) { c.system = "spark" },
		func(c *config) { c.backend = "rocksdb" },
		func(c *config) { c.system, c.checkpoints = "flink", "s3://b/p" },
		func(c *config) { c.download, c.checkpoints = true, "dir" },
		func(c *config) { c.work.ValueBytes = 4 },
	} {
		d := c
		bad(&d)
		if err := d.validate(); err == nil {
			t.Errorf("validate(%+v): no error", d)
		}
	}
}
