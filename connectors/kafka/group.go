package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// GroupOptions configures a membership in a consumer group ([JoinGroup]).
type GroupOptions struct {
	// Conn says how to reach the cluster. Conn.Brokers is required.
	Conn Conn
	// Group is the consumer group's name. Required by JoinGroup;
	// package cluster sets it to "exactly-" + the job's name when empty.
	Group string
	// Topics are the topics whose partitions the group assigns to its
	// members. Required; every topic must exist.
	Topics []string
	// SessionTimeout is how long the group waits for a member that stopped
	// heartbeating (killed, paused, cut off) before it hands the member's
	// partitions to the others. Default 10s; the broker bounds it with
	// group.min.session.timeout.ms and group.max.session.timeout.ms.
	SessionTimeout time.Duration
	// RebalanceTimeout bounds how long a member may take to give up
	// revoked partitions in a rebalance (GroupEvents.Revoked). Default 60s.
	// The classic protocol only: KIP-848's broker gives a member its
	// session timeout to reconcile.
	RebalanceTimeout time.Duration
	// Protocol is the group's rebalance protocol: GroupProtocolClassic or
	// GroupProtocolConsumer (KIP-848). Empty means DefaultGroupProtocol.
	// Every member of a group must use the same one.
	Protocol GroupProtocol
}

// GroupEvents receive the changes of a member's assignment. Each is called
// from the group's own goroutine, never concurrently with another, with a
// map from topic to partitions that the callee may keep.
type GroupEvents struct {
	// Assigned receives partitions newly assigned to the member.
	Assigned func(map[string][]int32)
	// Revoked receives partitions the group takes away in an orderly
	// rebalance. The group waits until it returns before it hands them to
	// another member: return only when their work has stopped.
	Revoked func(map[string][]int32)
	// Lost receives partitions the member no longer owns without a
	// rebalance (its session expired, its generation was fenced): another
	// member may own them already.
	Lost func(map[string][]int32)
	// Refused, when set, receives the error when the brokers refuse the
	// member the group (no Read ACL on it): the member cannot join, and
	// would otherwise wait for an assignment forever. The error is
	// permanent and names the ACL to grant. Optional.
	Refused func(error)
}

// groupRefusals is a hook of the member's client that passes a refusal of
// the group to GroupEvents.Refused, once.
type groupRefusals struct {
	conn  Conn
	group string
	once  sync.Once
	f     func(error)
}

// OnGroupManageError implements kgo.HookGroupManageError.
func (h *groupRefusals) OnGroupManageError(err error) {
	if refused := h.conn.refused(err, "Read", "group "+h.group); refused != nil {
		h.once.Do(func() { h.f(refused) })
	}
}

// Membership is a member of a consumer group, used for its assignment
// only: it never fetches records and never commits offsets.
type Membership struct {
	cl       *kgo.Client
	group    string
	topics   []string
	protocol GroupProtocol
}

func (o *GroupOptions) validate() error {
	if err := o.Conn.validate("GroupOptions"); err != nil {
		return err
	}
	if o.Group == "" {
		return errors.New("kafka: GroupOptions.Group is empty: name the consumer group the instances share")
	}
	if len(o.Topics) == 0 {
		return errors.New("kafka: GroupOptions.Topics is empty: list the topics whose partitions the group assigns")
	}
	if o.SessionTimeout < 0 || o.RebalanceTimeout < 0 {
		return fmt.Errorf("kafka: GroupOptions.SessionTimeout = %v, RebalanceTimeout = %v: use 0 for the defaults (10s, 60s) or positive durations", o.SessionTimeout, o.RebalanceTimeout)
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 10 * time.Second
	}
	if o.RebalanceTimeout == 0 {
		o.RebalanceTimeout = time.Minute
	}
	if o.Protocol == "" {
		o.Protocol = DefaultGroupProtocol
	}
	return o.Protocol.validate()
}

// JoinGroup joins the group with its protocol (GroupOptions.Protocol): a
// rebalance moves only the partitions that must move, and a member keeps
// working on the others meanwhile. The events start once the group has
// balanced; call Leave to leave. While the brokers cannot be reached (a
// start during a broker's restart), JoinGroup tries again until ctx ends.
func JoinGroup(ctx context.Context, opts GroupOptions, ev GroupEvents) (*Membership, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if ev.Assigned == nil || ev.Revoked == nil || ev.Lost == nil {
		return nil, errors.New("kafka: JoinGroup: GroupEvents.Assigned, Revoked and Lost are all required")
	}
	call := func(f func(map[string][]int32)) func(context.Context, *kgo.Client, map[string][]int32) {
		return func(_ context.Context, _ *kgo.Client, m map[string][]int32) { f(m) }
	}
	clOpts := append(opts.clientOpts(),
		kgo.ConsumerGroup(opts.Group),
		kgo.ConsumeTopics(opts.Topics...),
		kgo.DisableAutoCommit(),
		kgo.OnPartitionsAssigned(call(ev.Assigned)),
		kgo.OnPartitionsRevoked(call(ev.Revoked)),
		kgo.OnPartitionsLost(call(ev.Lost)),
	)
	if ev.Refused != nil {
		clOpts = append(clOpts, kgo.WithHooks(&groupRefusals{conn: opts.Conn, group: opts.Group, f: ev.Refused}))
	}
	var cl *kgo.Client
	err := untilReachable(ctx, func() error {
		// The topics are checked before the member joins: once it has
		// joined, a failure would close the client, which waits for the
		// group's events, whose callee may be waiting for JoinGroup to
		// return.
		if _, err := listTopics(ctx, opts.Conn, opts.Topics, "GroupOptions.Topics", "Read"); err != nil {
			return err
		}
		if opts.Protocol == GroupProtocolConsumer {
			if err := prepareConsumerGroup(ctx, opts); err != nil {
				return err
			}
		}
		var err error
		cl, err = opts.Conn.newClient(ctx, clOpts...)
		return err
	})
	if err != nil {
		return nil, err
	}
	// The member is for the assignment only: the tasks read their
	// partitions from their checkpointed positions with their own clients.
	cl.PauseFetchTopics(opts.Topics...)
	return &Membership{cl: cl, group: opts.Group, topics: opts.Topics, protocol: opts.Protocol}, nil
}

// Leave leaves the group (its partitions go to the other members at once,
// without waiting for the session timeout) and closes the connection. The
// Revoked event runs for the partitions still assigned.
func (m *Membership) Leave(ctx context.Context) error {
	err := m.cl.LeaveGroupContext(ctx)
	m.cl.Close()
	return err
}

// Member returns the member's id in the group, "" before it joined.
func (m *Membership) Member() string {
	id, _ := m.cl.GroupMetadata()
	return id
}

// GroupMember is one member of a consumer group as the broker describes
// it ([Membership.Describe]).
type GroupMember struct {
	// Member is its member id, Client its client id, Host the address the
	// broker sees it at.
	Member, Client, Host string
	// Topics are the topics it subscribed to when it joined, sorted; the
	// broker tells them only while the group is stable.
	Topics []string
	// Partitions are the partitions the group assigned it, by topic.
	Partitions map[string][]int32
}

// Group is a consumer group as its coordinator describes it.
type Group struct {
	// State is the group's state: Stable, PreparingRebalance,
	// CompletingRebalance, Empty or Dead. Only a Stable group's
	// description holds its members' subscriptions and assignments.
	State string
	// Members are its members, in the order of their member ids.
	Members []GroupMember
}

// Describe asks the group's coordinator for the group's state, members,
// their subscriptions and assigned partitions: the assignment of every
// instance, not only this one's.
func (m *Membership) Describe(ctx context.Context) (Group, error) {
	if m.protocol == GroupProtocolConsumer {
		return describeConsumerGroup(ctx, kadm.NewClient(m.cl), m.group)
	}
	described, err := kadm.NewClient(m.cl).DescribeGroups(ctx, m.group)
	if err != nil {
		return Group{}, fmt.Errorf("kafka: describing group %q: %w", m.group, err)
	}
	g, ok := described[m.group]
	if !ok {
		return Group{}, fmt.Errorf("kafka: describing group %q: the broker did not answer for it", m.group)
	}
	if g.Err != nil {
		return Group{}, fmt.Errorf("kafka: describing group %q: %w", m.group, g.Err)
	}
	out := Group{State: g.State, Members: make([]GroupMember, 0, len(g.Members))}
	for _, d := range g.Members {
		gm := GroupMember{Member: d.MemberID, Client: d.ClientID, Host: d.ClientHost, Partitions: map[string][]int32{}}
		if c, ok := d.Join.AsConsumer(); ok {
			gm.Topics = slices.Sorted(slices.Values(c.Topics))
		}
		if c, ok := d.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				gm.Partitions[t.Topic] = append(gm.Partitions[t.Topic], t.Partitions...)
			}
		}
		out.Members = append(out.Members, gm)
	}
	slices.SortFunc(out.Members, func(a, b GroupMember) int { return strings.Compare(a.Member, b.Member) })
	return out, nil
}
