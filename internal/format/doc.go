// Package format holds every versioned encoding of a checkpoint: the bytes
// the engine writes to disk and reads back to restore a job. Each encoding
// has one Encode/Decode (or Append/Read) pair here, with its version
// constants; decoders read every version this build reads, never panic on
// any input and report malformed input with errors wrapping
// [checkpoint.ErrCorrupt]. docs/checkpoint-format.md describes every byte.
//
// The encodings, outermost first:
//
//   - the file envelope of every file of the checkpoint store ([Seal],
//     [Unseal]: magic, [Version], length, payload, CRC-32C);
//   - the payloads of the store's files: the checkpoint metadata
//     ([EncodeMetadata]), a subtask's state file ([EncodeState]), and the
//     directory's _ids, _owner and _incarnation files ([EncodeIDs],
//     [EncodeOwner], [EncodeIncarnation]);
//   - inside a state file, the keyed-state blob of one key group
//     ([AppendSection], [BlobReader]; package state writes the entries), and
//     the operator entries: source split positions ([EncodeSplitPosition]),
//     keyed operators' watermarks ([EncodeWatermark]) and sink committables
//     ([EncodeCommittable]).
//
// # Why internal
//
// Nothing outside the engine needs these bytes: users and connector authors
// see [checkpoint.Metadata], [checkpoint.SubtaskSnapshot] and
// [sink.Committable] as Go values, and a connector's own position or
// transaction data is opaque bytes inside an entry. Keeping the encodings
// internal lets a later version change them (adding a version, as
// committables and split positions did) without an API promise; the
// compatibility promise is about the bytes, and it is kept by the fixtures
// in testdata, written by the previous release, that every build must read.
//
// # Imports
//
// This package imports package checkpoint, for the types it encodes and for
// ErrCorrupt, and package sink, for [sink.Committable]; neither imports
// anything of the engine. It must not import runtime or stream, which use
// it. checkpoint/store, state, stream and internal/commit call it; package
// checkpoint cannot, so the metadata version is defined there
// ([checkpoint.FormatVersion], which its coordinator writes) and [Version]
// is that constant.
package format
