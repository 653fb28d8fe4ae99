package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestPipelineOnACluster runs one pipeline file — a kafka source, a
// key_by and a windowed aggregate, a kafka sink — as two instances of a
// cluster (RunOptions.Cluster, exactly run --cluster): cut into two stages
// at its key_by, the window stage's watermark from the four tasks of the
// first. Every window must be written once, as one process computes it.
func TestPipelineOnACluster(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	name := kafkatest.UniqueName("pipeline-cluster")
	in, out := name+"-in", name+"-out"
	kafkatest.CreateTopic(t, adm, in, 4)
	kafkatest.CreateTopic(t, adm, out, 2)
	kafkatest.DeleteRepartitionTopicsAtEnd(t, adm, name)
	const n = 360
	want := map[string]int{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(in), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range n + 4 {
		user, ts := fmt.Sprintf("u%d", i%6), i*1000
		if i >= n {
			user, ts = "end", 10_000_000_000 // one per partition: closes every window of the others
		} else {
			want[fmt.Sprintf("%s@%d", user, i/10*10)]++
		}
		v := fmt.Sprintf(`{"user": %q, "ts": %d}`, user, ts)
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte(v), Partition: int32(i % 4)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
	yaml := `
name: ` + name + `
source: {kind: kafka, brokers: ["` + brokers + `"], topics: [` + in + `]}
decode: {format: json, fields: {user: string, ts: int}}
event_time: {field: ts}
transforms:
  - key_by: user
  - aggregate:
      window: {kind: tumbling, size: 10s}
      values: {n: count()}
sink: {kind: kafka, brokers: ["` + brokers + `"], topic: ` + out + `, key: key}
checkpoint: {interval: 200ms, storage: ` + t.TempDir() + `}
`
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i := range errs {
		p, err := Parse("cluster.yaml", []byte(yaml), env)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Run(ctx, RunOptions{Cluster: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		}()
	}
	recs := kafkatest.ReadCommitted(t, brokers, out, len(want), 2*time.Minute)
	stop()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("instance %d: %v", i, err)
		}
	}
	var got, wanted []string
	for _, r := range recs {
		var w struct {
			Key         string    `json:"key"`
			WindowStart time.Time `json:"window_start"`
			N           int       `json:"n"`
		}
		if err := json.Unmarshal(r.Value, &w); err != nil {
			t.Fatalf("output %s: %v", r.Value, err)
		}
		got = append(got, fmt.Sprintf("%s@%d:%d", w.Key, w.WindowStart.Unix(), w.N))
	}
	for k, c := range want {
		wanted = append(wanted, fmt.Sprintf("%s:%d", k, c))
	}
	slices.Sort(got)
	slices.Sort(wanted)
	if !slices.Equal(got, wanted) {
		t.Errorf("windows:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wanted, "\n"))
	}
}
