package stream_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/exactlyonce/exactly/internal/testwait"
	"github.com/exactlyonce/exactly/source"
	"github.com/exactlyonce/exactly/stream"
	"go.uber.org/goleak"
)

// growing is an unbounded source whose splits appear over time: split k
// holds the values [100k, 100k+100).
type growing struct {
	mu      sync.Mutex
	splits  int
	opened  atomic.Int32 // OpenNew calls
	started time.Time
}

func (g *growing) Splits(context.Context) ([]string, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if time.Since(g.started) > 30*time.Millisecond {
		g.splits = 3
	}
	var ids []string
	for k := range g.splits {
		ids = append(ids, fmt.Sprint(k))
	}
	return ids, nil
}

func (g *growing) Open(_ context.Context, split string, pos []byte) (source.Reader[int], error) {
	var k int
	fmt.Sscan(split, &k)
	r := &growingReader{base: 100 * k}
	if len(pos) > 0 {
		n, _ := binary.Uvarint(pos)
		r.next = int(n)
	}
	return r, nil
}

func (g *growing) DiscoveryInterval() time.Duration { return 5 * time.Millisecond }
func (g *growing) Owner(split string, parallelism int) int {
	var k int
	fmt.Sscan(split, &k)
	return k % parallelism
}
func (g *growing) OpenNew(ctx context.Context, split string) (source.Reader[int], error) {
	g.opened.Add(1)
	return g.Open(ctx, split, nil)
}

type growingReader struct{ base, next int }

func (r *growingReader) Read(_ context.Context, buf []int) (int, error) {
	n := 0
	for n < len(buf) && r.next < 100 {
		buf[n] = r.base + r.next
		n++
		r.next++
	}
	return n, nil // unbounded: never EOF
}
func (r *growingReader) Position() []byte { return binary.AppendUvarint(nil, uint64(r.next)) }
func (r *growingReader) Close() error     { return nil }

func TestSplitsDiscoveredWhileRunning(t *testing.T) {
	defer goleak.VerifyNone(t)
	synctest.Test(t, func(t *testing.T) {
		src := &growing{splits: 1, started: time.Now()}
		out := newMemSink[int]()
		j := stream.New("discovery")
		stream.SinkTo(stream.Source(j, "growing", src, stream.Parallelism(2)), "out", out)
		ctx, cancel := context.WithCancel(context.Background())
		r, err := j.Start(ctx, stream.Options{CheckpointDir: t.TempDir(), CheckpointInterval: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		testwait.For(t, out.rowsVisible.Reached(300), 20*time.Second, "300 rows visible (splits 1 and 2 discovered)",
			func() string {
				return fmt.Sprintf("%d visible, OpenNew called %d times", len(out.Visible()), src.opened.Load())
			})
		cancel()
		r.Wait()
		seen := map[int]int{}
		for _, v := range out.Visible() {
			seen[v]++
		}
		for v := range 300 {
			if seen[v] != 1 {
				t.Errorf("value %d visible %d times", v, seen[v])
			}
		}
		if n := src.opened.Load(); n != 2 {
			t.Errorf("OpenNew called %d times, want 2 (splits 1 and 2)", n)
		}
	})
}
