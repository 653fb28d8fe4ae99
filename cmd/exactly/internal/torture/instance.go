package torture

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/exactlyonce/exactly/cluster"
	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/stream"
)

// instanceSession is the consumer group's session timeout in a cluster
// run: the least the broker allows by default, so that a killed or paused
// instance's tasks move within seconds.
const instanceSession = 6 * time.Second

// runInstance runs this process as one instance of a cluster run's job,
// with cluster.RunJob, until SIGTERM (the end of ctx) stops it cleanly:
// it then returns nil. Its log, at level Info, tells the supervisor which
// tasks it ran and whether it found itself fenced.
func runInstance(ctx context.Context, c jobConfig, j *stream.Job, opts stream.Options) error {
	opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	return cluster.RunJob(ctx, j, cluster.Options{
		Group: kafka.GroupOptions{Conn: kafka.Conn{Brokers: []string{c.Brokers}}, Group: c.Group, SessionTimeout: instanceSession},
		Job:   opts,
	})
}
