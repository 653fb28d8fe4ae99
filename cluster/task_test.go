package cluster

import "testing"

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
