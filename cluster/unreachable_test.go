package cluster_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/cluster"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/stream"
)

// TestStartWaitsForBrokersUpToCheckTimeout: an instance whose brokers
// cannot be reached waits for them (a start during a broker's restart,
// kafka's TestStartsWaitForBrokersThatCannotBeReached) up to
// Job.CheckTimeout, then fails saying so — both Run, which joins the
// group, and RunJob, which first reads the job's topics.
func TestStartWaitsForBrokersUpToCheckTimeout(t *testing.T) {
	t.Parallel()
	conn := kafka.Conn{Brokers: []string{"127.0.0.1:1"}, DialTimeout: 100 * time.Millisecond}
	opts := cluster.Options{Group: kafka.GroupOptions{Conn: conn, Topics: []string{"in"}}, Job: stream.Options{CheckpointDir: t.TempDir(), CheckTimeout: time.Second}}
	err := cluster.Run(context.Background(), "unreachable", opts, func(string, cluster.Task) (*stream.Job, error) {
		t.Error("a task was built with no brokers")
		return nil, nil
	})
	if err == nil || !strings.Contains(err.Error(), "joining the group") || !strings.Contains(err.Error(), "still so after trying for") {
		t.Errorf("Run with no brokers: %v; want the join to have waited and failed", err)
	}

	j, err := stagesJob("unreachable", conn, "in", "out")
	if err != nil {
		t.Fatal(err)
	}
	opts.Group.Topics = nil
	err = cluster.RunJob(context.Background(), j, opts)
	if err == nil || !strings.Contains(err.Error(), "cannot reach the brokers") || !strings.Contains(err.Error(), "still so after trying for") {
		t.Errorf("RunJob with no brokers: %v; want the topics' partitions to have been waited for", err)
	}
}
