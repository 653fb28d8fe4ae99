package kafka_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/exactlyonce/exactly/connectors/kafka"
	"github.com/exactlyonce/exactly/internal/kafkatest"
	"github.com/exactlyonce/exactly/internal/testenv"
)

// closingBroker stands for a broker that restarts: it closes every
// connection as soon as it is accepted (as a broker that is starting
// does) until openAfter has passed since the first, then it forwards
// connections to the real broker. The clients learn the real broker's
// address from the metadata and go there after their first request.
type closingBroker struct {
	ln        net.Listener
	to        string
	openAfter time.Duration
	opening   sync.Once
	open      atomic.Bool
	closed    atomic.Int64 // connections closed at once
	wg        sync.WaitGroup
}

func newClosingBroker(t *testing.T, to string, openAfter time.Duration) *closingBroker {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &closingBroker{ln: ln, to: to, openAfter: openAfter}
	b.wg.Add(1)
	go b.serve()
	t.Cleanup(func() { _ = ln.Close(); b.wg.Wait() })
	return b
}

func (b *closingBroker) addr() string { return b.ln.Addr().String() }

func (b *closingBroker) serve() {
	defer b.wg.Done()
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		if !b.open.Load() {
			b.closed.Add(1)
			_ = c.Close()
			b.opening.Do(func() { time.AfterFunc(b.openAfter, func() { b.open.Store(true) }) })
			continue
		}
		up, err := net.Dial("tcp", b.to)
		if err != nil {
			_ = c.Close()
			continue
		}
		b.wg.Add(2)
		pipe := func(dst, src net.Conn) {
			defer b.wg.Done()
			_, _ = io.Copy(dst, src)
			_ = dst.Close()
			_ = src.Close()
		}
		go pipe(up, c)
		go pipe(c, up)
	}
}

// TestStartsWaitForBrokersThatCannotBeReached: joining a group, reading a
// job's topics' partitions and creating a repartition topic, started while
// the broker closes every connection (it restarts), try again until it
// answers instead of failing at the first try — an instance of a cluster
// started during a broker's restart stopped at once (torture seed
// 1796612486112917876). Brokers that never answer fail each when its ctx
// ends, with the time tried.
func TestStartsWaitForBrokersThatCannotBeReached(t *testing.T) {
	t.Parallel()
	brokers := testenv.Kafka(t)
	adm := kafkatest.Admin(t, brokers)
	topic := kafkatest.UniqueName("unreachable")
	kafkatest.CreateTopic(t, adm, topic, 2)
	repartition := kafkatest.UniqueName("unreachable-repartition")
	group := kafkatest.UniqueName("unreachable")
	t.Cleanup(func() {
		_, _ = adm.DeleteTopics(context.Background(), repartition)
		_, _ = adm.DeleteGroup(context.Background(), group)
	})
	ev := kafka.GroupEvents{Assigned: func(map[string][]int32) {}, Revoked: func(map[string][]int32) {}, Lost: func(map[string][]int32) {}}

	starts := []struct {
		name string
		run  func(ctx context.Context, conn kafka.Conn) error
	}{
		{"JoinGroup", func(ctx context.Context, conn kafka.Conn) error {
			m, err := kafka.JoinGroup(ctx, kafka.GroupOptions{Conn: conn, Group: group, Topics: []string{topic}}, ev)
			if err == nil {
				err = m.Leave(ctx)
			}
			return err
		}},
		{"TopicPartitions", func(ctx context.Context, conn kafka.Conn) error {
			n, err := kafka.TopicPartitions(ctx, conn, []string{topic})
			if err == nil && n[topic] != 2 {
				err = errors.New("wrong partition count")
			}
			return err
		}},
		{"EnsureTopic", func(ctx context.Context, conn kafka.Conn) error {
			return kafka.EnsureTopic(ctx, conn, repartition, 2)
		}},
	}
	for _, s := range starts {
		// Closed for longer than a try (twice the dial timeout) from the
		// first connection: the first try fails.
		b := newClosingBroker(t, brokers, 1500*time.Millisecond)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		err := s.run(ctx, kafka.Conn{Brokers: []string{b.addr()}, DialTimeout: 200 * time.Millisecond})
		cancel()
		if err != nil {
			t.Errorf("%s while the broker restarts: %v; want it to wait for the broker", s.name, err)
		}
		if b.closed.Load() == 0 {
			t.Errorf("%s: the broker closed no connection: the test did not make it wait", s.name)
		}
		t.Logf("%s: waited through %d closed connections", s.name, b.closed.Load())

		ctx, cancel = context.WithTimeout(context.Background(), time.Second)
		err = s.run(ctx, kafka.Conn{Brokers: []string{"127.0.0.1:1"}, DialTimeout: 200 * time.Millisecond})
		cancel()
		if err == nil || !strings.Contains(err.Error(), "cannot reach the brokers") || !strings.Contains(err.Error(), "still so after trying for") {
			t.Errorf("%s with no broker: %v; want the brokers not reached, and for how long it tried", s.name, err)
		}
	}
}
