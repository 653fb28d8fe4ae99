// Package store keeps checkpoints and savepoints durably in a local
// directory, with checksums on every file and detection of corruption.
//
// # Layout
//
//	<dir>/_ids                                  highest id ever reserved
//	<dir>/chk-00000000000000000042/             one directory per checkpoint
//	    <operator>-<subtask>.state              state of one subtask of one operator
//	    _metadata                               written last: makes the checkpoint complete
//	<dir>/savepoints/sp-00000000000000000043/   savepoints: same layout, never removed
//
// Ids are zero-padded to 20 digits so that names sort like ids. Checkpoints
// and savepoints share one id sequence, reserved with [Store.ReserveID] and
// recorded in _ids before use, so ids never repeat, even after the
// directories of old checkpoints were deleted. Operator names are escaped
// into safe, unambiguous file names (see stateFileName).
//
// # File format
//
// Every file is wrapped in one envelope: an 8-byte magic that tells the kind
// of file ("EXMETA", "EXSTATE", "EXIDS", NUL-padded), a uint32 format
// version, a uint64 payload length, the payload, and a CRC-32C (Castagnoli)
// of everything before it; integers are big-endian. Readers check the magic,
// the length and the checksum, then the version, before decoding anything,
// and never panic on corrupt input: they return errors wrapping [ErrCorrupt].
// The metadata payload is the JSON of [checkpoint.Metadata]; a state payload
// is a binary encoding of [checkpoint.SubtaskSnapshot] with uvarint lengths
// and key groups in increasing order. The metadata also records each state
// file's size and CRC-32C, so a state file that was replaced is detected too.
// The encodings are those of package internal/format; the file
// docs/checkpoint-format.md describes every byte.
//
// # Durability order
//
// A checkpoint must never be seen half-written, because restoring from it
// would lose state, and committing the transactions it covers would break
// exactly-once. The store therefore makes the checkpoint complete with one
// atomic step, taken only after everything it depends on is durable:
//
//  1. [Store.WriteState] writes and fsyncs each state file.
//  2. [Store.Complete] fsyncs the checkpoint directory (the state files'
//     names are durable) and its parent (the directory itself is durable).
//  3. It writes the metadata to _metadata.tmp and fsyncs it.
//  4. It renames _metadata.tmp to _metadata: the atomic step.
//  5. It fsyncs the directory, making the rename durable; only then does
//     Complete return, and only then may the caller commit transactions.
//
// Without step 2 the rename could reach the disk before the state files'
// names; without the fsync in 3 the rename could reach it before the
// metadata's contents; without 5 a checkpoint reported complete could vanish
// in a crash. A crash at any point leaves either no _metadata (an incomplete
// checkpoint, ignored and later removed) or a complete, valid checkpoint.
// _ids is replaced the same way (write tmp, fsync, rename, fsync directory).
//
// # Recovery
//
// [Store.Latest] returns the newest checkpoint whose metadata and state
// files are all present and intact, logging a warning for each newer one it
// skips. Old checkpoints are removed (metadata first, so a crash leaves an
// incomplete checkpoint, not a broken complete one) when a newer checkpoint
// completes, keeping [Options].Retained of them.
//
// All file I/O goes through [vfs.FS], so that crashes and I/O errors can be
// simulated in tests.
package store
