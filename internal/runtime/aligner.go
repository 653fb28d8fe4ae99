package runtime

import "github.com/exactlyonce/exactly/checkpoint"

// barrier is a checkpoint barrier: what the driver asks a source task to
// emit, what travels in a [Message] between tasks, and what an operator
// task aligns. Its id is 0 in a message that is no barrier.
type barrier struct {
	id   checkpoint.ID
	kind checkpoint.Kind
	// endOfInput: the final checkpoint after every source finished.
	// Nothing may be emitted after it, so timers stop firing.
	endOfInput bool
}

// aligner is the barrier alignment of an operator task with several
// inputs, as a pure state machine: the task reports each barrier and each
// end of stream that arrives on an input, and the aligner says when to
// take a checkpoint and which inputs may be read. An input on which the
// barrier being aligned has arrived is blocked (read no further) until the
// barrier has arrived on every live input: the state then taken holds
// exactly the records before the barrier on every input. A barrier newer
// than the one being aligned abandons it (the coordinator gave that
// checkpoint up); an older one, or one of a checkpoint already taken, is
// ignored. An input that ended counts as aligned for every later barrier.
type aligner struct {
	blocked  []bool        // the barrier being aligned arrived on this input
	ended    []bool        // the producer sent the end of its stream
	live     int           // inputs not ended
	aligning barrier       // the barrier being aligned; id 0 when none
	arrived  int           // inputs on which it arrived
	taken    checkpoint.ID // the newest checkpoint taken
}

func newAligner(inputs int) *aligner {
	return &aligner{blocked: make([]bool, inputs), ended: make([]bool, inputs), live: inputs}
}

// readable reports whether input i may be read: it is neither blocked nor
// ended.
func (a *aligner) readable(i int) bool { return !a.blocked[i] && !a.ended[i] }

// liveInputs reports how many inputs have not ended.
func (a *aligner) liveInputs() int { return a.live }

// onBarrier handles barrier b arriving on input i; it returns the barrier
// whose checkpoint to take now, if any.
func (a *aligner) onBarrier(i int, b barrier) (take barrier, ok bool) {
	switch {
	case b.id < a.aligning.id || b.id <= a.taken:
		return barrier{}, false // a barrier of an abandoned or taken checkpoint
	case b.id > a.aligning.id:
		// A newer checkpoint: any alignment in progress is abandoned.
		clear(a.blocked)
		a.arrived = 0
		a.aligning = b
	}
	if !a.blocked[i] {
		a.blocked[i] = true
		a.arrived++
	}
	return a.aligned()
}

// onEnd handles the end of the stream of input i; it returns the barrier
// whose checkpoint to take now, if any (the ended input was the last one
// the barrier being aligned waited for). When the last input ends, no
// checkpoint is taken: the task ends its own stream.
func (a *aligner) onEnd(i int) (take barrier, ok bool) {
	if a.ended[i] {
		return barrier{}, false
	}
	a.ended[i] = true
	a.live--
	if a.blocked[i] {
		a.blocked[i] = false
		a.arrived--
	}
	if a.live == 0 {
		return barrier{}, false
	}
	return a.aligned()
}

// aligned ends the alignment once the barrier arrived on every live input.
func (a *aligner) aligned() (barrier, bool) {
	if a.aligning.id == 0 || a.arrived < a.live {
		return barrier{}, false
	}
	b := a.aligning
	clear(a.blocked)
	a.aligning, a.arrived, a.taken = barrier{}, 0, b.id
	return b, true
}
