package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/exactlyonce/exactly/connectors/kafka"
)

// checkGroup returns an error when another member of the instance's group
// subscribes to other topics than it does: another job of the same name
// (the group and the repartition topics are named after the job), or
// another version of this job whose stages changed. Their tasks would
// share the group, and where their operators have the same names, the
// repartition topics too: records of one job read as the other's. It runs
// at each assignment, before any assigned task starts, so that the member
// that joins such a group fails before it processes anything; a running
// instance that is assigned new work while the other is in the group fails
// too. When the broker cannot describe the group, it logs that and lets
// the assignment go on.
func (in *Instance) checkGroup() error {
	<-in.joined
	if in.membership == nil {
		return nil // joining failed: Start returns that
	}
	ctx, cancel := context.WithTimeout(in.ctx, 30*time.Second)
	defer cancel()
	members, err := in.membership.Assignment(ctx)
	if err != nil {
		if ctx.Err() == nil {
			in.log.Warn("cluster: describing the group to check its members failed; checking again at the next assignment", "err", err)
		}
		return nil
	}
	return foreignMember(in.name, in.opts.Group.Group, in.membership.Member(), in.opts.Group.Topics, members)
}

// foreignMember returns an error naming the first member of the group,
// other than self, whose subscription differs from topics; nil when every
// member subscribes to the same topics. A member whose subscription the
// broker does not describe (not a consumer) is skipped.
func foreignMember(job, group, self string, topics []string, members []kafka.GroupMember) error {
	mine := slices.Sorted(slices.Values(topics))
	for _, m := range members {
		if m.Member == self || len(m.Topics) == 0 || slices.Equal(m.Topics, mine) {
			continue
		}
		return fmt.Errorf("cluster: job %q: member %s (client %s at %s) of group %q subscribes to topics %v, and this instance to %v: "+
			"another job named %q, or another version of this job with other stages, shares the group (which, with the repartition topics, is named after the job): "+
			"give each job its own name (stream.New; the pipeline's name), or stop every instance of the old version before starting the changed one",
			job, m.Member, m.Client, m.Host, group, m.Topics, mine, job)
	}
	return nil
}
