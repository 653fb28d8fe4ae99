package kafka

import (
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// producers keeps a sink's transactional producer clients across
// transactions, in this process: a writer hands the client of a prepared
// transaction over instead of closing it, the committer commits with it
// (the client's own EndTxn, which also tells the client its producer
// epoch after the commit), and the client then waits, with no transaction
// open, for the next transaction under its id. A transaction then costs
// no new client, no connection and no InitProducerID, which the broker
// writes into its transaction log (docs/kafka.md, "Producers kept across
// transactions").
//
// Whatever cannot be trusted is closed instead of kept: a commit through
// the client that fails for any reason (the committer then ends the
// transaction by protocol, as it does for a restored committable), a
// prepared transaction that is aborted, a client idle longer than the
// transaction timeout, and every client under a sink's prefix when a
// committer of that prefix opens (a restart: the new owner fences or
// aborts the ids the old clients hold) or closes.
type producers struct {
	mu       sync.Mutex
	prepared map[string]keptProducer // by transactional id: its transaction is prepared, waiting for its commit
	idle     map[string]keptProducer // by transactional id: no transaction open
	opened   int                     // clients opened, for tests
	reused   int                     // transactions begun in a kept client, for tests
}

// keptProducer is a client kept between the transactions of its
// transactional id.
type keptProducer struct {
	cl    *kgo.Client
	hook  *versionHook
	pid   int64 // for a prepared transaction: its producer id and epoch
	epoch int16
	since time.Time // when it was kept
}

func newProducers() *producers {
	return &producers{prepared: map[string]keptProducer{}, idle: map[string]keptProducer{}}
}

// prepare keeps p, whose transaction under id is prepared.
func (ps *producers) prepare(id string, p keptProducer) { ps.put(ps.prepared, id, p) }

// put keeps p under id in m, closing a client kept there before.
func (ps *producers) put(m map[string]keptProducer, id string, p keptProducer) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p.since = time.Now()
	if old, ok := m[id]; ok {
		go old.cl.Close()
	}
	m[id] = p
}

// takePrepared takes the client of id's prepared transaction, if it is
// kept and wrote it under producer id pid and epoch.
func (ps *producers) takePrepared(id string, pid int64, epoch int16) (keptProducer, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.prepared[id]
	if !ok {
		return p, false
	}
	delete(ps.prepared, id)
	if p.pid != pid || p.epoch != epoch {
		go p.cl.Close()
		return p, false
	}
	return p, true
}

// dropPrepared closes the client of id's prepared transaction, if kept:
// the transaction is about to be ended by protocol.
func (ps *producers) dropPrepared(id string) {
	ps.dropFrom(func(kept string) bool { return kept == id }, ps.prepared)
}

// keepIdle keeps p, whose transaction under id was committed, for id's
// next transaction.
func (ps *producers) keepIdle(id string, p keptProducer) { ps.put(ps.idle, id, p) }

// hasIdle reports whether a client is kept for id's next transaction.
func (ps *producers) hasIdle(id string) bool {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	_, ok := ps.idle[id]
	return ok
}

// takeIdle takes the client kept for id's next transaction, unless it
// was kept longer than maxIdle (it is closed then: the coordinator may
// have forgotten its producer id).
func (ps *producers) takeIdle(id string, maxIdle time.Duration) (keptProducer, bool) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	p, ok := ps.idle[id]
	if !ok {
		return p, false
	}
	delete(ps.idle, id)
	if time.Since(p.since) >= maxIdle {
		go p.cl.Close()
		return p, false
	}
	ps.reused++
	return p, true
}

// countOpened counts a client opened for a transaction.
func (ps *producers) countOpened() {
	ps.mu.Lock()
	ps.opened++
	ps.mu.Unlock()
}

// drop closes every kept client whose id mine picks.
func (ps *producers) drop(mine func(id string) bool) {
	ps.dropFrom(mine, ps.prepared, ps.idle)
}

// dropIdle closes every client kept with no transaction open whose id
// mine picks.
func (ps *producers) dropIdle(mine func(id string) bool) { ps.dropFrom(mine, ps.idle) }

func (ps *producers) dropFrom(mine func(id string) bool, maps ...map[string]keptProducer) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for _, m := range maps {
		for id, p := range m {
			if mine(id) {
				delete(m, id)
				go p.cl.Close()
			}
		}
	}
}
