package kafka_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/source"
)

// readSplit reads r until it has read max records or, when max is
// negative, until the split ends; it returns the values read.
func readSplit(t *testing.T, r source.Reader[kafka.Record[string]], max int) []string {
	t.Helper()
	var got []string
	buf := make([]kafka.Record[string], 100)
	for deadline := time.Now().Add(30 * time.Second); max < 0 || len(got) < max; {
		if time.Now().After(deadline) {
			t.Fatalf("read %d records in 30s, want %d", len(got), max)
		}
		size := len(buf)
		if max >= 0 {
			size = min(size, max-len(got))
		}
		n, err := r.Read(context.Background(), buf[:size])
		for _, rec := range buf[:n] {
			got = append(got, rec.Value)
		}
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// openSplit opens split of src at pos.
func openSplit(t *testing.T, src *kafka.Source[string], split string, pos []byte) source.Reader[kafka.Record[string]] {
	t.Helper()
	r, err := src.Open(context.Background(), split, pos)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// topicOf3000 creates a topic of one partition named after prefix and
// writes 3000 records into it; it returns the brokers and the topic.
func topicOf3000(t *testing.T, prefix string) (brokers, topic string) {
	t.Helper()
	brokers = testenv.Kafka(t)
	topic = kafkatest.UniqueName(prefix)
	kafkatest.CreateTopic(t, kafkatest.Admin(t, brokers), topic, 1)
	produceInput(t, brokers, topic, 1, 3000)
	return brokers, topic
}

// TestBoundedEndFixedAtFirstOpen (issue 10, case 8): a bounded split ends
// at the end offset seen when it was first opened, also when it is opened
// again at a checkpointed position after more records arrived (a restore
// after a failover).
func TestBoundedEndFixedAtFirstOpen(t *testing.T) {
	t.Parallel()
	brokers, topic := topicOf3000(t, "bounded")
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topics: []string{topic}, Bounded: true}, kafka.String())
	if err != nil {
		t.Fatal(err)
	}
	split := topic + "/0"
	first := openSplit(t, src, split, nil)
	atOpen := first.Position() // what the engine records right after Open
	readSplit(t, first, 1000)
	afterRead := first.Position() // a checkpoint after 1000 records
	produceInput(t, brokers, topic, 1, 1000)
	for _, tc := range []struct {
		name string
		pos  []byte
		want int
	}{{"restored before reading", atOpen, 3000}, {"restored after 1000 records", afterRead, 2000}} {
		if got := readSplit(t, openSplit(t, src, split, tc.pos), -1); len(got) != tc.want {
			t.Errorf("%s: read %d records, want %d: the end offset must stay the one of the first open (3000)", tc.name, len(got), tc.want)
		}
	}
}

// TestUnboundedRestoreOfBoundedRun (issue 10, case 9): an unbounded source
// given the position of a bounded run's split fails to open it with an
// error that explains, unless SourceOptions.ReadPastBoundedEnd is set: the
// split then reads on past the bounded run's end.
func TestUnboundedRestoreOfBoundedRun(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic := kafkatest.UniqueName("unbound")
	kafkatest.CreateTopic(t, adm, topic, 1)
	produceInput(t, brokers, topic, 1, 10)
	conn := kafka.Conn{Brokers: []string{brokers}}
	bounded, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{topic}, Bounded: true}, kafka.String())
	if err != nil {
		t.Fatal(err)
	}
	split := topic + "/0"
	r := openSplit(t, bounded, split, nil)
	readSplit(t, r, -1)
	finished := r.Position()
	produceInput(t, brokers, topic, 1, 5)

	unbounded, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{topic}}, kafka.String())
	if err != nil {
		t.Fatal(err)
	}
	_, err = unbounded.Open(context.Background(), split, finished)
	t.Log(err)
	if err == nil || !strings.Contains(err.Error(), "bounded run") || !strings.Contains(err.Error(), "end offset 10") ||
		!strings.Contains(err.Error(), "SourceOptions.ReadPastBoundedEnd") {
		t.Fatalf("unbounded Open of a finished bounded split: %v; want an error naming the bounded run's end offset 10 and the fix", err)
	}
	cont, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{topic}, ReadPastBoundedEnd: true}, kafka.String())
	if err != nil {
		t.Fatal(err)
	}
	if got := readSplit(t, openSplit(t, cont, split, finished), 5); len(got) != 5 || got[0] != "k000:0" {
		t.Fatalf("with ReadPastBoundedEnd: read %v, want the 5 records after the bounded run's end", got)
	}
}

// TestSourceLag checks the lag a split's reader tells: unknown before its
// first fetch, then the offsets between its position and the end of the
// log, and for a bounded split its fixed end.
func TestSourceLag(t *testing.T) {
	t.Parallel()
	brokers, topic := topicOf3000(t, "lag")
	split := topic + "/0"
	for _, bounded := range []bool{false, true} {
		src, err := kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Topics: []string{topic}, Bounded: bounded}, kafka.String())
		if err != nil {
			t.Fatal(err)
		}
		r := openSplit(t, src, split, nil)
		l, ok := r.(source.Lagger)
		if !ok {
			t.Fatal("the Kafka reader is no source.Lagger")
		}
		if _, _, ok := l.Lag(); ok != bounded {
			t.Errorf("bounded %v: lag known before the first fetch: %v", bounded, ok)
		}
		readSplit(t, r, 1000)
		if lag, unit, ok := l.Lag(); !ok || lag != 2000 || unit != "offsets" {
			t.Errorf("bounded %v: after 1000 of 3000 records the lag is %d %s (known %v), want 2000 offsets", bounded, lag, unit, ok)
		}
		readSplit(t, r, 2000)
		if lag, _, ok := l.Lag(); !ok || lag != 0 {
			t.Errorf("bounded %v: at the end the lag is %d (known %v), want 0", bounded, lag, ok)
		}
	}
}
