package kafka

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupProtocol is the rebalance protocol of a consumer group
// ([GroupOptions.Protocol]).
type GroupProtocol string

const (
	// GroupProtocolClassic is the classic protocol (JoinGroup and
	// SyncGroup) with the cooperative-sticky assignor, computed by a
	// member: a rebalance moves only the partitions that must move, in two
	// rounds (revoke, then assign), and the other members go on meanwhile.
	GroupProtocolClassic GroupProtocol = "classic"
	// GroupProtocolConsumer is KIP-848's consumer protocol (Kafka 4.0+):
	// the broker's coordinator assigns the partitions (its uniform
	// assignor, sticky) and each member reconciles on its heartbeats,
	// without a group-wide barrier. The session timeout and heartbeat
	// interval are the group's configs (consumer.session.timeout.ms,
	// consumer.heartbeat.interval.ms), which JoinGroup sets from
	// [GroupOptions.SessionTimeout]; the broker bounds them with
	// group.consumer.min.session.timeout.ms and
	// group.consumer.min.heartbeat.interval.ms (defaults 45s and 5s).
	GroupProtocolConsumer GroupProtocol = "consumer"
)

// DefaultGroupProtocol is the protocol of a [GroupOptions] whose Protocol
// is empty. docs/scale-out.md says why (the rebalance pauses measured with
// each, side by side).
const DefaultGroupProtocol = GroupProtocolClassic

// apiConsumerGroupHeartbeat is the key of KIP-848's heartbeat request.
const apiConsumerGroupHeartbeat = 68

// validate checks the protocol's name.
func (p GroupProtocol) validate() error {
	switch p {
	case GroupProtocolClassic, GroupProtocolConsumer:
		return nil
	}
	return fmt.Errorf("kafka: GroupOptions.Protocol is %q: use %q (the default) or %q (KIP-848, Kafka 4.0+)", string(p), GroupProtocolClassic, GroupProtocolConsumer)
}

// clientOpts are the group options of the franz-go client for the
// protocol.
func (o *GroupOptions) clientOpts() []kgo.Opt {
	if o.Protocol == GroupProtocolConsumer {
		// The sticky balancer names the broker's "uniform" assignor.
		return []kgo.Opt{kgo.Balancers(kgo.StickyBalancer()), kgo.ServerSideBalancer()}
	}
	return []kgo.Opt{
		kgo.Balancers(kgo.CooperativeStickyBalancer()),
		kgo.SessionTimeout(o.SessionTimeout),
		kgo.HeartbeatInterval(o.SessionTimeout / 5),
		kgo.RebalanceTimeout(o.RebalanceTimeout),
	}
}

// prepareConsumerGroup checks that the brokers speak KIP-848 (franz-go
// would silently fall back to the classic protocol) and sets the group's
// session timeout and heartbeat interval (a fifth of it, as the classic
// member does) as the group's configs.
func prepareConsumerGroup(ctx context.Context, opts GroupOptions) error {
	cl, err := opts.Conn.newClient(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	versions, err := adm.ApiVersions(ctx)
	if err != nil {
		return fmt.Errorf("kafka: asking the brokers for their API versions (GroupOptions.Protocol %q): %w", opts.Protocol, err)
	}
	for _, b := range versions.Sorted() {
		if b.Err != nil {
			return fmt.Errorf("kafka: asking broker %d for its API versions (GroupOptions.Protocol %q): %w", b.NodeID, opts.Protocol, b.Err)
		}
		if v, ok := b.KeyMaxVersion(apiConsumerGroupHeartbeat); !ok || v < 1 {
			return fmt.Errorf("kafka: broker %d does not speak KIP-848's consumer group protocol (ConsumerGroupHeartbeat v1, Kafka 4.0+ with \"consumer\" in group.coordinator.rebalance.protocols): "+
				"use GroupOptions.Protocol %q or upgrade the brokers", b.NodeID, GroupProtocolClassic)
		}
	}
	return setGroupConfigs(ctx, cl, opts.Group, []groupConfig{
		{"consumer.session.timeout.ms", opts.SessionTimeout},
		{"consumer.heartbeat.interval.ms", opts.SessionTimeout / 5},
	})
}

// groupConfig is a config of a consumer group that holds a duration.
type groupConfig struct {
	name  string
	value time.Duration
}

// setGroupConfigs sets configs, in milliseconds, on group (resource type
// GROUP, KIP-848).
func setGroupConfigs(ctx context.Context, cl *kgo.Client, group string, configs []groupConfig) error {
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	var set []string
	for _, gc := range configs {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name = gc.name
		c.Op = kmsg.IncrementalAlterConfigOpSet
		c.Value = kmsg.StringPtr(strconv.FormatInt(gc.value.Milliseconds(), 10))
		res.Configs = append(res.Configs, c)
		set = append(set, c.Name+"="+*c.Value)
	}
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return fmt.Errorf("kafka: setting the configs of group %q: %w", group, err)
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			msg := ""
			if r.ErrorMessage != nil {
				msg = *r.ErrorMessage + ": "
			}
			return fmt.Errorf("kafka: setting %s of group %q (from GroupOptions.SessionTimeout, with Protocol %q): %s%w: "+
				"the broker bounds them with group.consumer.min.session.timeout.ms and group.consumer.min.heartbeat.interval.ms (defaults 45s and 5s): lower those in the broker's configuration, or raise GroupOptions.SessionTimeout",
				strings.Join(set, ", "), group, GroupProtocolConsumer, msg, err)
		}
	}
	return nil
}

// describeConsumerGroup describes a KIP-848 consumer group
// (ConsumerGroupDescribe) as [Membership.Describe] does a classic one.
func describeConsumerGroup(ctx context.Context, adm *kadm.Client, group string) (Group, error) {
	described, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		return Group{}, fmt.Errorf("kafka: describing consumer group %q: %w", group, err)
	}
	g, ok := described[group]
	if !ok {
		return Group{}, fmt.Errorf("kafka: describing consumer group %q: the broker did not answer for it", group)
	}
	if g.Err != nil {
		if errors.Is(g.Err, kerr.GroupIDNotFound) {
			return Group{}, fmt.Errorf("kafka: describing consumer group %q: %w (a classic group of that name, or no group yet)", group, g.Err)
		}
		return Group{}, fmt.Errorf("kafka: describing consumer group %q: %w", group, g.Err)
	}
	out := Group{State: g.State, Members: make([]GroupMember, 0, len(g.Members))}
	for _, d := range g.Members {
		gm := GroupMember{Member: d.MemberID, Client: d.ClientID, Host: d.ClientHost, Partitions: map[string][]int32{},
			Topics: slices.Sorted(slices.Values(d.SubscribedTopics))}
		for topic, ps := range d.Assignment {
			for p := range ps {
				gm.Partitions[topic] = append(gm.Partitions[topic], p)
			}
			slices.Sort(gm.Partitions[topic])
		}
		out.Members = append(out.Members, gm)
	}
	slices.SortFunc(out.Members, func(a, b GroupMember) int { return strings.Compare(a.Member, b.Member) })
	return out, nil
}
