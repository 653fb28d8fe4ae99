// Package checkpoint holds what a checkpoint is made of, as users, the
// storage (package checkpoint/store) and the engine share it: its
// [Metadata], the [ID] and [Kind] of a checkpoint, the handles and snapshots of
// subtask state, the [FormatVersion] the engine writes, and [ErrCorrupt],
// the one mark of corrupt checkpoint data. The bytes are described in
// docs/checkpoint-format.md; the protocol that takes checkpoints (the
// coordinator) and the recovery decision are the engine's
// (internal/coordinator).
package checkpoint
