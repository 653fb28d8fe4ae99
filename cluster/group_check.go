package cluster

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/exactlyonce/exactly/connectors/kafka"
)

// checkGroup returns an error when another member of the instance's group
// subscribes to topics this instance does not: another job of the same
// name (the group and the repartition topics are named after the job), or
// another version of this job whose stages changed. Their tasks would
// share the group, and where their operators have the same names, the
// repartition topics too: records of one job read as the other's.
//
// It runs at this instance's first assignment, before any task starts, so
// that an instance that joins such a group fails before it processes
// anything; instances already running are left alone (the joining one is
// the mistake). The broker tells the members' subscriptions only while
// the group is stable: when it is rebalancing again, the check is left to
// recheckGroup, in the background, and the instance may start its tasks
// meanwhile. When the broker cannot describe the group at all, the check
// is logged and skipped.
func (in *Instance) checkGroup() error {
	select {
	case <-in.joined:
	case <-time.After(groupCheckWait):
		// JoinGroup has not returned: nothing to describe the group with.
		in.log.Warn("cluster: the group's members were not checked: joining did not return", "wait", groupCheckWait)
		return nil
	}
	if in.membership == nil {
		return nil // joining failed: Start returns that
	}
	err, known := in.describeAndCheck()
	if !known {
		go in.recheckGroup()
	}
	return err
}

// recheckGroup checks the group until the broker describes it stable, for
// at most groupCheckWait, and fails the instance if another job is in it.
func (in *Instance) recheckGroup() {
	deadline := time.Now().Add(groupCheckWait)
	for time.Now().Before(deadline) {
		select {
		case <-in.ctx.Done():
			return
		case <-time.After(time.Second):
		}
		err, known := in.describeAndCheck()
		if err != nil {
			in.log.Error("cluster: stopping this instance", "err", err)
			in.do(func() []action { return in.l.fail(err) })
			return
		}
		if known {
			return
		}
	}
	in.log.Warn("cluster: the group's members were not checked: the group did not stay stable long enough to be described", "wait", groupCheckWait)
}

// groupCheckWait bounds the checks of the group's members.
const groupCheckWait = 30 * time.Second

// describeAndCheck describes the group once; known says whether the
// description held every member's subscription (the group was stable).
func (in *Instance) describeAndCheck() (err error, known bool) {
	ctx, cancel := context.WithTimeout(in.ctx, 10*time.Second)
	defer cancel()
	g, err := in.membership.Describe(ctx)
	if err != nil {
		if ctx.Err() == nil {
			in.log.Warn("cluster: describing the group to check its members failed; checking again", "err", err)
		}
		return nil, false
	}
	if g.State != "Stable" {
		return nil, false
	}
	return foreignMember(in.name, in.opts.Group.Group, in.membership.Member(), in.opts.Group.Topics, g.Members), true
}

// foreignMember returns an error naming the first member of the group,
// other than self, subscribed to a topic not in topics; nil when there is
// none. A member subscribed to fewer topics is not taken for another job:
// a client joins with the topics its metadata lists, and an instance that
// starts right after a repartition topic was created may not see it yet. A
// member whose subscription the broker does not describe (not a consumer)
// is skipped.
func foreignMember(job, group, self string, topics []string, members []kafka.GroupMember) error {
	mine := slices.Sorted(slices.Values(topics))
	for _, m := range members {
		if m.Member == self || len(m.Topics) == 0 {
			continue
		}
		for _, t := range m.Topics {
			if _, found := slices.BinarySearch(mine, t); !found {
				return fmt.Errorf("cluster: job %q: member %s (client %s at %s) of group %q subscribes to topics %v, and this instance to %v: "+
					"another job named %q, or another version of this job with other stages, shares the group (which, with the repartition topics, is named after the job): "+
					"give each job its own name (stream.New; the pipeline's name), or stop every instance of the old version before starting the changed one",
					job, m.Member, m.Client, m.Host, group, m.Topics, mine, job)
			}
		}
	}
	return nil
}
