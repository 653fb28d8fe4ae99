package stream_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/internal/stages"
	"github.com/exactlyonce/exactly/source"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

// keyCount is a running count of a key, the record between the stages of
// stagedJob.
type keyCount struct {
	Key string
	N   int
}

// runningCount counts the records of each key and emits out(key, count)
// for each.
func runningCount[IN, OUT any](out func(key string, n int) OUT) func(ctx *stream.Context[string]) (stream.ProcessFunc[string, IN, OUT], error) {
	return func(ctx *stream.Context[string]) (stream.ProcessFunc[string, IN, OUT], error) {
		count, err := state.NewValueState(ctx.State(), "count", state.JSONCodec[int]{})
		return stream.ProcessFunc[string, IN, OUT]{Process: func(ctx *stream.Context[string], _ IN, o *stream.Output[OUT]) error {
			n, _ := count.Value()
			n++
			count.Update(n)
			o.Emit(out(ctx.Key(), n))
			return nil
		}}, err
	}
}

// stagedJob keys the numbers [0, 3000) by their remainder by 17, counts
// each key's records, keys the counts by their remainder by 5 and counts
// those: three stages. Every output "k:c" (the c-th record of key k of the
// second count) is independent of the order in which the records arrive,
// so the output of a run in stages is the output of a run in one process
// as long as every record of a key reaches the one task that owns it.
func stagedJob(out *memSink[string]) *stream.Job {
	j := stream.New("staged")
	nums := stream.Source(j, "numbers", counting{n: 3000, splits: 3})
	counts := stream.Process(stream.KeyBy(nums, func(v int) string { return fmt.Sprint(v % 17) }, state.StringCodec{}), "per-number",
		runningCount[int](func(k string, n int) keyCount { return keyCount{k, n} }))
	again := stream.Process(stream.KeyBy(counts, func(c keyCount) string { return fmt.Sprint(c.N % 5) }, state.StringCodec{}), "per-count",
		runningCount[keyCount](func(k string, n int) string { return fmt.Sprintf("%s:%d", k, n) }))
	stream.SinkTo(again, "out", out)
	return j
}

// TestStagesRunLikeOneProcess runs stagedJob in one process, then as its
// three stages one after the other, the stages after the first as one
// task per partition of the repartition topic they read (kept in memory,
// 4 partitions), and compares the outputs.
func TestStagesRunLikeOneProcess(t *testing.T) {
	ctx := context.Background()
	whole := newMemSink[string]()
	if err := stagedJob(whole).Run(ctx, stream.Options{CheckpointDir: t.TempDir()}); err != nil {
		t.Fatal(err)
	}
	const partitions = 4
	staged := newMemSink[string]()
	j := stagedJob(staged)
	opts := stream.Options{CheckpointDir: t.TempDir()}
	hasSources, reads, writes, err := stream.StagesForTest(j, opts)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(hasSources, reads, writes); got != "[true false false] [[] [staged-per-number-0-repartition] [staged-per-count-0-repartition]] [[staged-per-number-0-repartition] [staged-per-count-0-repartition] []]" {
		t.Fatalf("stages: %s", got)
	}
	topics := map[string]*memTopic{}
	topic := func(name string) *memTopic {
		if topics[name] == nil {
			topics[name] = &memTopic{parts: make([][][]byte, partitions)}
		}
		return topics[name]
	}
	for s := range hasSources {
		tasks := partitions
		if hasSources[s] {
			tasks = 1 // the test's source is not split by partition
		}
		for p := range tasks {
			sj, err := stream.StageJobForTest(j, opts, fmt.Sprintf("staged.%d.%d", s, p), s,
				func(sj *stream.Job, name string) (stream.Stream[[]byte], error) {
					return stream.Source(sj, name+".read", memPartition{topic(name).parts[p]}), nil
				},
				func(s stream.Stream[stages.Envelope], name string) error {
					out := newMemSink[stages.Envelope]()
					stream.SinkTo(s, name+".write", out)
					topic(name).written = append(topic(name).written, out)
					return nil
				})
			if err != nil {
				t.Fatal(err)
			}
			if err := sj.Run(ctx, stream.Options{CheckpointDir: t.TempDir()}); err != nil {
				t.Fatalf("stage %d, task %d: %v", s, p, err)
			}
		}
		for _, tp := range topics {
			tp.deliver(128)
		}
	}
	for name, tp := range topics {
		var sizes []int
		for _, part := range tp.parts {
			sizes = append(sizes, len(part))
		}
		t.Logf("%s: records per partition %v", name, sizes)
		if slices.Max(sizes) == 3000 {
			t.Errorf("%s holds every record in one partition (%v): the key groups are not dealt over the partitions", name, sizes)
		}
	}
	want, got := whole.Visible(), staged.Visible()
	slices.Sort(want)
	slices.Sort(got)
	if len(want) != 3000 || !slices.Equal(got, want) {
		t.Errorf("in stages: %d records, in one process %d; first differences: %s", len(got), len(want), firstDiff(got, want))
	}
}

// firstDiff describes where two sorted lists first differ.
func firstDiff(a, b []string) string {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return fmt.Sprintf("at %d: %q, want %q", i, a[i], b[i])
		}
	}
	return fmt.Sprintf("lengths %d and %d", len(a), len(b))
}

// TestStagesRefuseRecordsJSONCannotCarry: a KeyBy of records with an
// unexported field cannot cross to another stage as JSON: the stage job is
// refused, naming the field.
func TestStagesRefuseRecordsJSONCannotCarry(t *testing.T) {
	type hidden struct {
		Key   string
		count int
	}
	j := stream.New("hidden")
	recs := stream.Map(stream.Source(j, "numbers", counting{n: 10, splits: 1}), func(v int) hidden { return hidden{fmt.Sprint(v), v} })
	stream.SinkTo(stream.Process(stream.KeyBy(recs, func(h hidden) string { return h.Key }, state.StringCodec{}), "count",
		runningCount[hidden](func(k string, n int) string { return k })), "out", newMemSink[string]())
	_, err := stream.StageJobForTest(j, stream.Options{CheckpointDir: t.TempDir()}, "hidden.0", 0,
		func(*stream.Job, string) (stream.Stream[[]byte], error) { return stream.Stream[[]byte]{}, nil },
		func(stream.Stream[stages.Envelope], string) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "stream_test.hidden.count is not exported") {
		t.Errorf("error: %v, want one naming the unexported field count", err)
	}
}

// memTopic is an in-memory topic: the encoded records of each partition,
// and the sinks of the stage tasks that wrote it.
type memTopic struct {
	parts   [][][]byte
	written []*memSink[stages.Envelope]
}

// deliver appends what the writers committed to the partitions of their
// key groups, of maxParallelism.
func (m *memTopic) deliver(maxParallelism int) {
	for _, w := range m.written {
		for _, e := range w.Visible() {
			p := stages.Partition(e.KeyGroup, maxParallelism, len(m.parts))
			m.parts[p] = append(m.parts[p], e.Value)
		}
	}
	m.written = nil
}

// memPartition is a bounded source of one partition's records.
type memPartition struct{ records [][]byte }

func (m memPartition) Splits(context.Context) ([]string, error) { return []string{"0"}, nil }

func (m memPartition) Open(_ context.Context, _ string, pos []byte) (source.Reader[[]byte], error) {
	_, next := openedAt("0", pos)
	return &memPartitionReader{records: m.records, next: next}, nil
}

type memPartitionReader struct {
	records [][]byte
	next    int
}

func (r *memPartitionReader) Read(_ context.Context, buf [][]byte) (int, error) {
	n := copy(buf, r.records[r.next:])
	if n == 0 {
		return 0, io.EOF
	}
	r.next += n
	return n, nil
}

func (r *memPartitionReader) Position() []byte { return binary.AppendUvarint(nil, uint64(r.next)) }
func (r *memPartitionReader) Close() error     { return nil }
