package runtime

import (
	"context"
	"sync"

	"github.com/exactlyonce/exactly/checkpoint"
)

// mailbox carries the driver's requests to a task without ever blocking the
// driver: the barriers to emit (source tasks), the highest completed
// checkpoint and the request to finish. The task drains it between
// batches.
type mailbox struct {
	mu        sync.Mutex
	barriers  []barrier
	completed checkpoint.ID
	finish    bool
	wake      chan struct{}
	// interrupt cancels the source poll in progress, if any, so that a
	// barrier or a commit notice does not wait for a blocking read.
	interrupt context.CancelFunc
}

func newMailbox() *mailbox { return &mailbox{wake: make(chan struct{}, 1)} }

// post changes the mailbox with f and wakes the task.
func (m *mailbox) post(f func(*mailbox)) {
	m.mu.Lock()
	f(m)
	if m.interrupt != nil {
		m.interrupt()
	}
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// interruptible returns a context for one source poll that the next post
// cancels (at once if mail is already waiting), and the function that
// ends it.
func (m *mailbox) interruptible(ctx context.Context) (context.Context, func()) {
	pctx, cancel := context.WithCancel(ctx)
	m.mu.Lock()
	m.interrupt = cancel
	m.mu.Unlock()
	if len(m.wake) > 0 {
		cancel()
	}
	return pctx, func() {
		m.mu.Lock()
		m.interrupt = nil
		m.mu.Unlock()
		cancel()
	}
}

// take returns the barriers the driver asked the task to emit since the
// last take, the highest completed checkpoint and whether to finish.
func (m *mailbox) take() (barriers []barrier, completed checkpoint.ID, finish bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	barriers, m.barriers = m.barriers, nil
	return barriers, m.completed, m.finish
}
