package kafka_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/stream"
)

// wantErr fails unless err mentions every one of parts.
func wantErr(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one mentioning %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not mention %q", err, p)
		}
	}
}

// TestBadConfiguration checks option validation without a broker.
func TestBadConfiguration(t *testing.T) {
	t.Parallel()
	enc := func(string) (kafka.Message, error) { return kafka.Message{}, nil }
	_, err := kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{"h:1"}}, TransactionTimeout: time.Second, CheckpointInterval: time.Second}, enc)
	wantErr(t, err, "TransactionTimeout", "3 checkpoint intervals")
	// Without SinkOptions.CheckpointInterval the writer checks against the
	// job's interval, which the engine gives it: set once, in the job.
	s, err := kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{"h:1"}}, TransactionTimeout: 2 * time.Second}, enc)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.NewWriter(context.Background(), sink.WriterInfo{Job: "j", Sink: "out", Parallelism: 1, CheckpointInterval: time.Second})
	wantErr(t, err, "TransactionTimeout 2s is shorter than 3 checkpoint intervals of this job (3s)")
	_, err = kafka.NewSink(kafka.SinkOptions{}, enc)
	wantErr(t, err, "Brokers is empty")
	_, err = kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{"h:1"}}, Watermarks: true}, enc)
	wantErr(t, err, "SinkOptions.Watermarks", "set SinkOptions.Topic too")
	_, err = kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{"h:1"}}, Topic: "t", Watermarks: true, Guarantee: kafka.AtLeastOnce}, enc)
	wantErr(t, err, "SinkOptions.Watermarks", "use it with Guarantee ExactlyOnce")
	_, err = kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{"h:1"}}, Topics: []string{"t"}, Upstreams: 2, ReadUncommitted: true}, kafka.String())
	wantErr(t, err, "SourceOptions.Upstreams is set with ReadUncommitted")
	_, err = kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{"h:1"}}, Topics: []string{"t"}, Upstreams: -1}, kafka.String())
	wantErr(t, err, "SourceOptions.Upstreams = -1 is negative")
	_, err = kafka.NewSink(kafka.SinkOptions{Conn: kafka.Conn{Brokers: []string{"h:1"}, SASL: kafka.SASL{Mechanism: "GSSAPI"}}}, enc)
	wantErr(t, err, "SASL.Mechanism", "GSSAPI")
	_, err = kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{"h:1"}}, Topics: []string{"a"}, TopicRegex: "b"}, kafka.String())
	wantErr(t, err, "exactly one of Topics and TopicRegex")
}

// TestUnreachableBrokers checks that a wrong address fails fast and says so.
func TestUnreachableBrokers(t *testing.T) {
	t.Parallel()
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: kafka.Conn{Brokers: []string{"127.0.0.1:1"}, DialTimeout: 200 * time.Millisecond}, Topics: []string{"x"}}, kafka.String())
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.Splits(context.Background())
	wantErr(t, err, "cannot reach the brokers", "127.0.0.1:1")
}

// TestMissingTopicAndBadRecord checks the errors for a missing topic and
// for a value that does not deserialize.
func TestMissingTopicAndBadRecord(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	conn := kafka.Conn{Brokers: []string{brokers}}
	src, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{kafkatest.UniqueName("missing")}}, kafka.String())
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.Splits(context.Background())
	wantErr(t, err, "does not exist")
	snk, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: kafkatest.UniqueName("missing")}, func(string) (kafka.Message, error) { return kafka.Message{}, nil })
	if err != nil {
		t.Fatal(err)
	}
	_, err = snk.NewWriter(context.Background(), sink.WriterInfo{Job: "t", Sink: "out"})
	wantErr(t, err, "SinkOptions.Topic", "does not exist")

	topic := kafkatest.UniqueName("badjson")
	kafkatest.CreateTopic(t, kafkatest.Admin(t, brokers), topic, 1)
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Value: []byte("1")}, &kgo.Record{Value: []byte("{not json")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	jsrc, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{topic}}, kafka.JSON[int]())
	if err != nil {
		t.Fatal(err)
	}
	r, err := jsrc.Open(context.Background(), topic+"/0", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]kafka.Record[int], 10)
	var got []int
	deadline := time.Now().Add(10 * time.Second)
	for err == nil && time.Now().Before(deadline) {
		var n int
		n, err = r.Read(context.Background(), buf)
		for _, rec := range buf[:n] {
			got = append(got, rec.Value)
		}
	}
	wantErr(t, err, topic+"/0 offset 1", "does not deserialize")
	if len(got) != 1 || got[0] != 1 {
		t.Fatalf("read %v before the bad record, want [1]", got)
	}
	if pos := r.Position(); len(pos) != 8 || pos[7] != 1 {
		t.Fatalf("position %x, want offset 1 (the bad record is not skipped)", pos)
	}
}

// TestStartRefusesBadKafkaConfiguration checks that a job whose topics are
// missing, or whose brokers cannot be reached, fails at Start with errors
// that name the operators and the fix, instead of after its restarts.
func TestStartRefusesBadKafkaConfiguration(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	job := func(conn kafka.Conn, in, out string) *stream.Job {
		src, err := kafka.NewSource(kafka.SourceOptions{Conn: conn, Topics: []string{in}}, kafka.String())
		if err != nil {
			t.Fatal(err)
		}
		snk, err := kafka.NewSink(kafka.SinkOptions{Conn: conn, Topic: out}, func(v kafka.Record[string]) (kafka.Message, error) {
			return kafka.Message{Value: []byte(v.Value)}, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		j := stream.New("refused")
		stream.SinkTo(stream.Source(j, "orders", src), "copies", snk)
		return j
	}
	in, out := kafkatest.UniqueName("missing-in"), kafkatest.UniqueName("missing-out")
	_, err := job(kafka.Conn{Brokers: []string{brokers}}, in, out).Start(context.Background(), stream.Options{CheckpointDir: t.TempDir()})
	wantErr(t, err, `operator "orders" cannot start`, in, "does not exist", `operator "copies" cannot start`, "SinkOptions.Topic", out)

	// Unreachable brokers are waited for, up to CheckTimeout.
	_, err = job(kafka.Conn{Brokers: []string{"127.0.0.1:1"}, DialTimeout: 200 * time.Millisecond}, in, out).Start(context.Background(), stream.Options{CheckpointDir: t.TempDir(), CheckTimeout: time.Second})
	wantErr(t, err, `operator "orders" cannot start`, "cannot reach the brokers", "127.0.0.1:1", "still so after trying for")
	t.Log(err)
}
