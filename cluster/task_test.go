package cluster

import (
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/connectors/generator"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
)

func TestTaskLocation(t *testing.T) {
	task := Task{Topic: "orders", Partition: 3}
	for base, want := range map[string]string{
		"/var/lib/job":                        "/var/lib/job/orders.3",
		"relative/dir/":                       "relative/dir/orders.3",
		"file:///var/lib/job":                 "file:///var/lib/job/orders.3",
		"s3://bucket/jobs/count?endpoint=h:1": "s3://bucket/jobs/count/orders.3?endpoint=h:1",
		"s3://bucket?endpoint=http://h:1&x=y": "s3://bucket/orders.3?endpoint=http://h:1&x=y",
	} {
		if got := taskLocation(base, task); got != want {
			t.Errorf("taskLocation(%q) = %q, want %q", base, got, want)
		}
	}
}

// TestTaskStateBackend checks that the tasks of an instance keep their
// Pebble databases apart (issue 27, case 6): in one directory, each task
// removed the others' local checkpoint copies.
func TestTaskStateBackend(t *testing.T) {
	pebble := state.BackendConfig{Kind: state.PebbleBackend, Dir: "/var/lib/job", MemoryBudget: 64 << 20}
	a := taskStateBackend(pebble, Task{Topic: "orders", Partition: 0})
	b := taskStateBackend(pebble, Task{Topic: "orders", Partition: 1})
	if a.Dir != "/var/lib/job/orders.0" || b.Dir != "/var/lib/job/orders.1" {
		t.Errorf("the Pebble directories of two tasks are %q and %q, want one of each task's own under /var/lib/job", a.Dir, b.Dir)
	}
	if a.MemoryBudget != pebble.MemoryBudget || a.Kind != pebble.Kind {
		t.Errorf("taskStateBackend changed more than the directory: %+v", a)
	}
	if heap := taskStateBackend(state.BackendConfig{}, Task{Topic: "orders"}); heap != (state.BackendConfig{}) {
		t.Errorf("the heap backend became %+v", heap)
	}
}

func TestReadsOnlyTheTaskPartition(t *testing.T) {
	task := Task{Topic: "orders", Partition: 2}
	conn := kafka.Conn{Brokers: []string{"127.0.0.1:1"}}
	jobWith := func(t *testing.T, o kafka.SourceOptions) *stream.Job {
		src, err := kafka.NewSource(o, kafka.String())
		if err != nil {
			t.Fatal(err)
		}
		j := stream.New("j")
		stream.Source(j, "in", src)
		return j
	}
	if err := readsOnly(jobWith(t, task.SourceOptions(kafka.SourceOptions{Conn: conn})), task); err != nil {
		t.Errorf("a source built with task.SourceOptions: %v", err)
	}
	for name, o := range map[string]kafka.SourceOptions{
		"every partition":   {Conn: conn, Topics: []string{"orders"}},
		"another partition": {Conn: conn, Topics: []string{"orders"}, Partitions: []int32{1}},
		"two partitions":    {Conn: conn, Topics: []string{"orders"}, Partitions: []int32{2, 3}},
		"another topic":     {Conn: conn, Topics: []string{"payments"}, Partitions: []int32{2}},
	} {
		err := readsOnly(jobWith(t, o), task)
		if err == nil || !strings.Contains(err.Error(), `source "in" of the job of task orders/2 reads`) {
			t.Errorf("%s: got %v, want an error naming the source and the task", name, err)
		}
	}
	gen, err := generator.New(generator.Options{}, func(i uint64) uint64 { return i })
	if err != nil {
		t.Fatal(err)
	}
	j := stream.New("j")
	stream.Source(j, "numbers", gen)
	if err := readsOnly(j, task); err == nil || !strings.Contains(err.Error(), "every task would read whole") {
		t.Errorf("a generator source: got %v, want it refused", err)
	}
}
