package control

import (
	"sync"
	"time"
)

// sampler samples a job's status at an interval; the rates it adds to a
// status are those between its last two samples.
type sampler struct {
	mu         sync.Mutex
	prev, last *sample
	history    []ThroughputPoint // oldest first, at most MaxThroughputPoints
	done       chan struct{}
	stopOnce   sync.Once
}

type sample struct {
	at     time.Time
	status Status
}

func newSampler(status func() Status, every time.Duration) *sampler {
	s := &sampler{done: make(chan struct{})}
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		s.take(status(), time.Now())
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.take(status(), time.Now())
			}
		}
	}()
	return s
}

// take records st as sampled at at.
func (s *sampler) take(st Status, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prev, s.last = s.last, &sample{at: at, status: st}
	if s.prev == nil {
		return
	}
	// The rates of the operators alone: their subtasks, shared with the
	// sample, are left out.
	ops := make([]Operator, len(st.Operators))
	for i, o := range st.Operators {
		o.Subtasks = nil
		ops[i] = o
	}
	rated := addRates(Status{Operators: ops}, s.prev.status, s.last.status, s.last.at.Sub(s.prev.at))
	p := ThroughputPoint{Time: s.last.at, Operators: make([]OperatorRate, 0, len(rated.Operators))}
	for _, o := range rated.Operators {
		p.Operators = append(p.Operators, OperatorRate{Name: o.Name, InPerSecond: o.InPerSecond, OutPerSecond: o.OutPerSecond})
	}
	if len(s.history) == MaxThroughputPoints {
		s.history = append(s.history[:0], s.history[1:]...)
	}
	s.history = append(s.history, p)
}

func (s *sampler) stop() { s.stopOnce.Do(func() { close(s.done) }) }

// withRates returns st with the rates and shares of time of the last
// sampling interval.
func (s *sampler) withRates(st Status) Status {
	s.mu.Lock()
	prev, last := s.prev, s.last
	st.Throughput = append([]ThroughputPoint{}, s.history...)
	s.mu.Unlock()
	if prev == nil {
		return st
	}
	return addRates(st, prev.status, last.status, last.at.Sub(prev.at))
}

// addRates fills st's rates from the counters of two samples dt apart.
func addRates(st, from, to Status, dt time.Duration) Status {
	secs := dt.Seconds()
	if secs <= 0 {
		return st
	}
	type ops struct{ from, to *Operator }
	byName := map[string]ops{}
	for i := range from.Operators {
		o := byName[from.Operators[i].Name]
		o.from = &from.Operators[i]
		byName[from.Operators[i].Name] = o
	}
	for i := range to.Operators {
		o := byName[to.Operators[i].Name]
		o.to = &to.Operators[i]
		byName[to.Operators[i].Name] = o
	}
	for i := range st.Operators {
		op := &st.Operators[i]
		o := byName[op.Name]
		if o.from == nil || o.to == nil {
			continue
		}
		op.InPerSecond = float64(o.to.RecordsIn-o.from.RecordsIn) / secs
		op.OutPerSecond = float64(o.to.RecordsOut-o.from.RecordsOut) / secs
		for k := range op.Subtasks {
			a, b := findSubtask(o.from.Subtasks, op.Subtasks[k].Task), findSubtask(o.to.Subtasks, op.Subtasks[k].Task)
			if a == nil || b == nil {
				continue
			}
			ms := secs * 1000
			op.Subtasks[k].Busy = clamp(float64(b.BusyMillis-a.BusyMillis) / ms)
			op.Subtasks[k].Backpressured = clamp(float64(b.BackpressuredMillis-a.BackpressuredMillis) / ms)
		}
	}
	return st
}

func findSubtask(ss []Subtask, task string) *Subtask {
	for i := range ss {
		if ss[i].Task == task {
			return &ss[i]
		}
	}
	return nil
}

func clamp(x float64) float64 { return min(max(x, 0), 1) }
