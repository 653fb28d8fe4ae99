package kafka_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/connectors/file"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/stream"
)

// producePoisoned writes n orders to topic's 3 partitions, every seventh
// of them a poison pill (invalid JSON, null, or a missing field), and
// returns the ids of the good ones and the values of the bad ones.
func producePoisoned(t *testing.T, brokers, topic string, n int) (good []string, bad []string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	pills := []string{`{"id": "x", "amount": `, `null`, `{"id":"y"}`}
	var recs []*kgo.Record
	for i := range n {
		v := fmt.Sprintf(`{"id":"o%d","amount":%d}`, i, i)
		if i%7 == 3 {
			v = pills[i%len(pills)]
			bad = append(bad, v)
		} else {
			good = append(good, fmt.Sprintf("o%d", i))
		}
		recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: []byte(v)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return good, bad
}

// idSink writes the ids of orders to files in dir.
func idSink(t *testing.T, dir string) *file.Sink[kafka.Record[order]] {
	t.Helper()
	s, err := file.NewSink(dir, func(dst []byte, r kafka.Record[order]) []byte { return append(dst, r.Value.ID...) }, file.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// readLines returns the lines of the committed files of a file sink.
func readLines(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue // not committed
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")...)
	}
	slices.Sort(lines)
	return lines
}

// TestDeadLetters: with DeadLetterDecodeErrors and StrictJSON, the poison
// pills of three partitions go, with their origin and error, to a
// dead-letter sink, and every good record to the main sink, each exactly
// once; with the default policy the same input fails the job with an
// error naming the record and the fix.
func TestDeadLetters(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic := kafkatest.UniqueName("poison")
	kafkatest.CreateTopic(t, adm, topic, 3)
	good, bad := producePoisoned(t, brokers, topic, 300)

	dir := t.TempDir()
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topics: []string{topic},
		Bounded: true, DecodeErrors: kafka.DeadLetterDecodeErrors}, kafka.StrictJSON[order]())
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New("dead-letters")
	orders, dead := kafka.SplitDeadLetters(stream.Source(j, "orders", src, stream.Parallelism(2)))
	okSink := idSink(t, filepath.Join(dir, "ok"))
	deadSink, err := file.NewSink(filepath.Join(dir, "dead"), func(dst []byte, d kafka.DeadLetter) []byte {
		return fmt.Appendf(dst, "%s\t%d\t%d\t%s\t%s", d.Value, d.Partition, d.Offset, d.Topic, d.Error)
	}, file.SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stream.SinkTo(orders, "ok", okSink)
	stream.SinkTo(dead, "dead", deadSink)
	if err := j.Run(context.Background(), stream.Options{CheckpointDir: filepath.Join(dir, "ckpt"), CheckpointInterval: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(good)
	if got := readLines(t, filepath.Join(dir, "ok")); !slices.Equal(got, good) {
		t.Errorf("main sink: %d records, want the %d good ones exactly once", len(got), len(good))
	}
	deadLines := readLines(t, filepath.Join(dir, "dead"))
	if len(deadLines) != len(bad) {
		t.Fatalf("dead letters: %d, want %d:\n%s", len(deadLines), len(bad), strings.Join(deadLines, "\n"))
	}
	for _, l := range deadLines {
		f := strings.Split(l, "\t")
		if len(f) != 5 || f[3] != topic || !slices.Contains(bad, f[0]) || f[4] == "" {
			t.Errorf("dead letter %q: want value, partition, offset, topic %s and the error", l, topic)
		}
	}
	t.Logf("%d good records, %d dead letters, e.g. %q", len(good), len(deadLines), deadLines[0])

	// The default policy fails the job, naming the record and the fix.
	failing, err := kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topics: []string{topic}, Bounded: true},
		kafka.StrictJSON[order]())
	if err != nil {
		t.Fatal(err)
	}
	fj := stream.New("fail-on-poison")
	stream.SinkTo(stream.Source(fj, "orders", failing), "ids", idSink(t, filepath.Join(dir, "fail-out")))
	err = fj.Run(context.Background(), stream.Options{CheckpointDir: filepath.Join(dir, "ckpt-fail"), Restart: stream.RestartStrategy{MaxAttempts: 1}})
	if err == nil || !strings.Contains(err.Error(), "does not deserialize") || !strings.Contains(err.Error(), "SourceOptions.DecodeErrors") {
		t.Fatalf("job over poison pills with the default policy = %v; want an error naming the record and SourceOptions.DecodeErrors", err)
	}

	// SkipDecodeErrors counts them.
	skipping, err := kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topics: []string{topic}, Bounded: true,
		DecodeErrors: kafka.SkipDecodeErrors}, kafka.StrictJSON[order]())
	if err != nil {
		t.Fatal(err)
	}
	sj := stream.New("skip-poison")
	stream.SinkTo(stream.Source(sj, "orders", skipping), "ids", idSink(t, filepath.Join(dir, "skip-out")))
	if err := sj.Run(context.Background(), stream.Options{CheckpointDir: filepath.Join(dir, "ckpt-skip")}); err != nil {
		t.Fatal(err)
	}
	if n := skipping.Skipped(); n != int64(len(bad)) {
		t.Errorf("Skipped() = %d, want %d", n, len(bad))
	}
}
