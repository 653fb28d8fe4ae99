package pipeline

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/exactlyonce/exactly/internal/testenv"
)

// uniqueName returns prefix with a suffix no other test run shares.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
}

// createTopics creates topics of two partitions, deleted when t ends.
func createTopics(t *testing.T, brokers string, topics ...string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	adm := kadm.NewClient(cl)
	ctx := context.Background()
	res, err := adm.CreateTopics(ctx, 2, 1, nil, topics...)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topics...) })
	return cl
}

// produce writes records, keyed, to topic.
func produce(t *testing.T, cl *kgo.Client, topic string, keys, values []string) {
	t.Helper()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(keys[i]), Value: []byte(v)}
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// TestExampleKafkaWindowedPostgres runs examples/kafka-windowed-postgres.yaml
// on a bounded read of a topic of 300 orders and checks the upserted table
// against windows computed here.
func TestExampleKafkaWindowedPostgres(t *testing.T) {
	brokers, dsn := testenv.Kafka(t), testenv.Postgres(t)
	topic, table := uniqueName("pipeline_orders"), uniqueName("pipeline_orders_per_minute")
	cl := createTopics(t, brokers, topic)
	base := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	type win struct{ orders, total, largest int }
	want := map[string]*win{}
	var keys, values []string
	for i := range 300 {
		customer, amount, ts := fmt.Sprintf("c%d", i%3), i%9+1, base.Add(time.Duration(i)*time.Second)
		keys = append(keys, customer)
		values = append(values, fmt.Sprintf(`{"customer":%q,"amount":%d,"ts":%d}`, customer, amount, ts.UnixMilli()))
		k := customer + " " + ts.Truncate(time.Minute).Format(time.RFC3339)
		if want[k] == nil {
			want[k] = &win{}
		}
		w := want[k]
		w.orders++
		w.total += amount
		w.largest = max(w.largest, amount)
	}
	produce(t, cl, topic, keys, values)
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		_ = conn.Close(context.Background())
	})
	for k, v := range map[string]string{"KAFKA_BROKERS": brokers, "ORDERS_TOPIC": topic, "DATABASE_URL": dsn, "ORDERS_TABLE": table, "BOUNDED": "true"} {
		t.Setenv(k, v)
	}
	runExample(t, "kafka-windowed-postgres.yaml")

	rows, err := conn.Query(context.Background(), "SELECT key, window_start, window_end, orders, total, largest FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var key string
		var start, end time.Time
		var orders, total, largest int64
		if err := rows.Scan(&key, &start, &end, &orders, &total, &largest); err != nil {
			t.Fatal(err)
		}
		if end.Sub(start) != time.Minute {
			t.Errorf("window [%v, %v) is not a minute long", start, end)
		}
		got = append(got, fmt.Sprintf("%s %s %d %d %d", key, start.UTC().Format(time.RFC3339), orders, total, largest))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var wantRows []string
	for k, w := range want {
		wantRows = append(wantRows, fmt.Sprintf("%s %d %d %d", k, w.orders, w.total, w.largest))
	}
	slices.Sort(got)
	slices.Sort(wantRows)
	if len(wantRows) != 15 || !slices.Equal(got, wantRows) {
		t.Errorf("table %s:\n%s\nwant:\n%s", table, strings.Join(got, "\n"), strings.Join(wantRows, "\n"))
	}
}

// TestExampleKafkaFilterMapKafka runs examples/kafka-filter-map-kafka.yaml
// on a bounded read of 100 orders and checks the committed messages of the
// output topic, keys and values.
func TestExampleKafkaFilterMapKafka(t *testing.T) {
	brokers := testenv.Kafka(t)
	in, out := uniqueName("pipeline_orders"), uniqueName("pipeline_large_orders")
	cl := createTopics(t, brokers, in, out)
	var keys, values, want []string
	for i := range 100 {
		customer := fmt.Sprintf("c%d", i%4)
		keys = append(keys, customer)
		values = append(values, fmt.Sprintf(`{"customer":%q,"amount":%d,"note":"ignored"}`, customer, i))
		if i >= 10 {
			tier := "silver"
			if i >= 50 {
				tier = "gold"
			}
			want = append(want, fmt.Sprintf(`C%d {"customer":"C%d","cents":%d,"tier":%q}`, i%4, i%4, i*100, tier))
		}
	}
	produce(t, cl, in, keys, values)
	for k, v := range map[string]string{"KAFKA_BROKERS": brokers, "ORDERS_TOPIC": in, "LARGE_ORDERS_TOPIC": out, "BOUNDED": "true"} {
		t.Setenv(k, v)
	}
	runExample(t, "kafka-filter-map-kafka.yaml")
	got := committedMessages(t, cl, out)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("topic %s holds %d committed messages:\n%s\nwant %d:\n%s", out, len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
}

// committedMessages returns "key value" of every message of topic whose
// transaction committed, sorted. It reads every record up to the end
// offsets, transaction markers included, and keeps a data record when the
// next marker of its producer in its partition is a commit.
func committedMessages(t *testing.T, cl *kgo.Client, topic string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	reader, err := kgo.NewClient(kgo.SeedBrokers(cl.OptValue(kgo.SeedBrokers).([]string)...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords())
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	left := 0
	ends.Each(func(o kadm.ListedOffset) { left += int(o.Offset) })
	var out []string
	open := map[[2]int64][]*kgo.Record{} // (partition, producer) → its records since its last marker
	for left > 0 {
		fs := reader.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("reading %s: %d records short of the end offsets: %v", topic, left, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			left--
			k := [2]int64{int64(r.Partition), r.ProducerID}
			if !r.Attrs.IsControl() {
				open[k] = append(open[k], r)
				return
			}
			if len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:4]) == 1 { // a commit marker
				for _, d := range open[k] {
					out = append(out, string(d.Key)+" "+string(d.Value))
				}
			}
			delete(open, k)
		})
	}
	for k, recs := range open {
		t.Errorf("partition %d: %d records of producer %d in a transaction that never ended", k[0], len(recs), k[1])
	}
	slices.Sort(out)
	return out
}

// TestPostgresAppend writes generated records into a PostgreSQL table in
// append mode and checks every row, with each field type.
func TestPostgresAppend(t *testing.T) {
	dsn := testenv.Postgres(t)
	table := uniqueName("pipeline_append")
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = conn.Exec(context.Background(), "DROP TABLE IF EXISTS "+table)
		_ = conn.Close(context.Background())
	})
	t.Setenv("PG_DSN", dsn)
	t.Chdir(t.TempDir())
	p, err := Parse("append.yaml", []byte(`
name: append
source:
  kind: generator
  count: 40
  fields: {id: index, label: '"n" + string(index)', half: 'float(index) / 2', even: 'index % 2 == 0', at: 'date("2026-12-01T00:00:00Z") + duration(string(index) + "s")'}
sink: {kind: postgres, dsn: "${PG_DSN}", table: `+table+`}
`), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background(), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(context.Background(), "SELECT id, label, half, even, at FROM "+table)
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for rows.Next() {
		var id int64
		var label string
		var half float64
		var even bool
		var at time.Time
		if err := rows.Scan(&id, &label, &half, &even, &at); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%d %s %v %v %s", id, label, half, even, at.UTC().Format(time.RFC3339)))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for i := range 40 {
		want = append(want, fmt.Sprintf("%d n%d %v %v %s", i, i, float64(i)/2, i%2 == 0, base.Add(time.Duration(i)*time.Second).Format(time.RFC3339)))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("table %s:\n%s\nwant:\n%s", table, strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestAtLeastOnceKafka writes with guarantee at_least_once: the sink then
// produces without transactions, and a failure-free run writes every
// record once.
func TestAtLeastOnceKafka(t *testing.T) {
	brokers := testenv.Kafka(t)
	topic := uniqueName("pipeline_at_least_once")
	cl := createTopics(t, brokers, topic)
	t.Setenv("KAFKA_BROKERS", brokers)
	t.Chdir(t.TempDir())
	p, err := Parse("alo.yaml", []byte(`
name: at-least-once
guarantee: at_least_once
source: {kind: generator, count: 20, fields: {id: index}}
sink: {kind: kafka, brokers: ["${KAFKA_BROKERS}"], topic: `+topic+`, format: csv, key: id}
`), os.LookupEnv)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background(), RunOptions{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reader, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	var got, want []string
	for i := range 20 {
		want = append(want, fmt.Sprintf("%d %d", i, i))
	}
	for len(got) < len(want) && ctx.Err() == nil {
		reader.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if r.Attrs.IsTransactional() {
				t.Errorf("offset %d is transactional under at_least_once", r.Offset)
			}
			got = append(got, string(r.Key)+" "+string(r.Value))
		})
	}
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	ends.Each(func(o kadm.ListedOffset) { total += o.Offset })
	slices.Sort(got)
	slices.Sort(want)
	if total != 20 || !slices.Equal(got, want) {
		t.Errorf("topic %s: %d records up to the end offsets, read %q; want 20: %q", topic, total, got, want)
	}
}
