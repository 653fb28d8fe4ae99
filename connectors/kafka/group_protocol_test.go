package kafka_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// TestGroupProtocolConsumer joins two members to a group on KIP-848's
// consumer protocol: the broker splits the topic's partitions between
// them, Describe (ConsumerGroupDescribe) tells both members'
// subscriptions and partitions, and when one leaves the other gets them
// all. The group's session timeout is its config, set by JoinGroup.
func TestGroupProtocolConsumer(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic, group := kafkatest.UniqueName("group-848"), kafkatest.UniqueName("group-848")
	kafkatest.CreateTopic(t, adm, topic, 4)
	t.Cleanup(func() { _, _ = adm.DeleteGroup(context.Background(), group) })
	ctx := context.Background()
	opts := kafka.GroupOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Group: group, Topics: []string{topic},
		SessionTimeout: 3 * time.Second, Protocol: kafka.GroupProtocolConsumer}

	type member struct {
		mu    sync.Mutex
		owned map[int32]bool
		m     *kafka.Membership
	}
	join := func() *member {
		mb := &member{owned: map[int32]bool{}}
		change := func(add bool) func(map[string][]int32) {
			return func(p map[string][]int32) {
				mb.mu.Lock()
				defer mb.mu.Unlock()
				for _, q := range p[topic] {
					if add {
						mb.owned[q] = true
					} else {
						delete(mb.owned, q)
					}
				}
			}
		}
		m, err := kafka.JoinGroup(ctx, opts, kafka.GroupEvents{Assigned: change(true), Revoked: change(false), Lost: change(false)})
		if err != nil {
			t.Fatal(err)
		}
		mb.m = m
		return mb
	}
	owned := func(mb *member) []int32 {
		mb.mu.Lock()
		defer mb.mu.Unlock()
		var ps []int32
		for p := range mb.owned {
			ps = append(ps, p)
		}
		slices.Sort(ps)
		return ps
	}
	a, b := join(), join()
	kafkatest.WaitFor(t, time.Minute, "both members to own two partitions each", func() bool {
		return len(owned(a)) == 2 && len(owned(b)) == 2
	})
	if all := slices.Sorted(slices.Values(append(owned(a), owned(b)...))); !slices.Equal(all, []int32{0, 1, 2, 3}) {
		t.Fatalf("the members own %v and %v: want partitions 0-3 split between them", owned(a), owned(b))
	}
	var g kafka.Group
	kafkatest.WaitFor(t, time.Minute, "the group to be described stable with both members", func() bool {
		var err error
		g, err = a.m.Describe(ctx)
		return err == nil && g.State == "Stable" && len(g.Members) == 2
	})
	for _, gm := range g.Members {
		mine := owned(a)
		if gm.Member == b.m.Member() {
			mine = owned(b)
		}
		if !slices.Equal(gm.Topics, []string{topic}) || !slices.Equal(gm.Partitions[topic], mine) {
			t.Errorf("described member %s: topics %v, partitions %v; want [%s] and %v", gm.Member, gm.Topics, gm.Partitions, topic, mine)
		}
	}
	if err := b.m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, time.Minute, "the member left to own every partition", func() bool { return len(owned(a)) == 4 })
	if err := a.m.Leave(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestGroupProtocolConsumerBounds: a session timeout below the broker's
// bound for consumer groups is refused by JoinGroup with the broker's
// setting to change, and an unknown protocol by its validation.
func TestGroupProtocolConsumerBounds(t *testing.T) {
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic := kafkatest.UniqueName("group-848-bounds")
	kafkatest.CreateTopic(t, adm, topic, 1)
	opts := kafka.GroupOptions{Conn: kafka.Conn{Brokers: []string{brokers}}, Group: kafkatest.UniqueName("group-848-bounds"), Topics: []string{topic},
		SessionTimeout: 100 * time.Millisecond, Protocol: kafka.GroupProtocolConsumer}
	ev := kafka.GroupEvents{Assigned: func(map[string][]int32) {}, Revoked: func(map[string][]int32) {}, Lost: func(map[string][]int32) {}}
	_, err := kafka.JoinGroup(context.Background(), opts, ev)
	if err == nil || !strings.Contains(err.Error(), "group.consumer.min.session.timeout.ms") {
		t.Fatalf("JoinGroup with a 100ms session on the consumer protocol: %v; want the broker's bound named", err)
	}
	t.Logf("refused: %v", err)
	opts.Protocol = "eager"
	_, err = kafka.JoinGroup(context.Background(), opts, ev)
	if err == nil || !strings.Contains(err.Error(), `GroupOptions.Protocol is "eager"`) {
		t.Fatalf("JoinGroup with protocol eager: %v; want the field and value named", err)
	}
}
