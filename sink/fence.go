package sink

import "github.com/exactlyonce/exactly/checkpoint"

// FenceStep is what a sink's [Committer.Fence] must do, decided by
// [DecideFence] from the owner the sink records.
type FenceStep int

const (
	// FenceDone: the sink already records this owner; nothing to do.
	FenceDone FenceStep = iota
	// FenceRecord: record the new owner (an older epoch of the same
	// incarnation, nothing recorded on a restore, or a takeover).
	FenceRecord
	// FenceCheckForeign: a fresh start over a sink this incarnation does
	// not own: fail with [ErrForeignProgress] if the sink holds committed
	// progress of another incarnation, else record the new owner.
	FenceCheckForeign
	// FenceRefuse: the sink records a newer epoch of this incarnation:
	// fail with [ErrFenced], this process is the zombie.
	FenceRefuse
)

// DecideFence is the fencing rule every sink applies, in one place: given
// the owner the sink records (found is false when it records none), the
// owner fencing, the id of the restored checkpoint (0 on a fresh start) and
// whether the user asked to take over another incarnation's output
// ([CommitterInfo].TakeOver), it returns the step to take. The sink makes
// the step atomic with its reading of the recorded owner.
func DecideFence(recorded Owner, found bool, me Owner, restored checkpoint.ID, takeOver bool) FenceStep {
	switch {
	case found && recorded == me:
		return FenceDone
	case found && recorded.Incarnation == me.Incarnation && recorded.Epoch > me.Epoch:
		return FenceRefuse
	case found && recorded.Incarnation == me.Incarnation, restored > 0, takeOver:
		return FenceRecord
	}
	return FenceCheckForeign
}
