package store

import (
	"errors"
	"fmt"
	"slices"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// This file holds what both stores do to the contents of checkpoint files,
// wherever the bytes live.

// encodeStateFile checks its arguments and returns the name and contents
// of the state file of one subtask of an operator.
func encodeStateFile(kind checkpoint.Kind, operator string, subtask int, snap checkpoint.SubtaskSnapshot) (name string, data []byte, err error) {
	if err := checkKind(kind); err != nil {
		return "", nil, err
	}
	if operator == "" {
		return "", nil, errors.New("checkpoint/store: WriteState: operator name is empty: give every stateful operator a unique name")
	}
	if subtask < 0 {
		return "", nil, fmt.Errorf("checkpoint/store: WriteState: subtask = %d: must be >= 0", subtask)
	}
	data, err = format.EncodeState(snap)
	if err != nil {
		return "", nil, fmt.Errorf("%w (operator %q, subtask %d)", err, operator, subtask)
	}
	return stateFileName(operator, subtask), data, nil
}

// stateHandle returns the handle of the state file called name holding
// data, the encoding of snap: with Subtask, File, Size, CRC32C and the
// shared files snap's databases refer to.
func stateHandle(subtask int, name string, data []byte, snap checkpoint.SubtaskSnapshot) checkpoint.StateHandle {
	return checkpoint.StateHandle{Subtask: subtask, File: name, Size: int64(len(data)), CRC32C: format.Checksum(data),
		Shared: format.SharedFilesOf(snap.DBs)}
}

// encodeMetadataFile checks m, sets its FormatVersion 0 or FormatVersion to
// the lowest version that describes it (so that builds that read only
// version 1 still read checkpoints without shared files), and returns the
// contents of its _metadata file.
func encodeMetadataFile(m *checkpoint.Metadata) ([]byte, error) {
	if err := checkKind(m.Kind); err != nil {
		return nil, err
	}
	needed := format.MetadataVersion(*m)
	switch {
	case m.FormatVersion == 0 || m.FormatVersion == FormatVersion:
		m.FormatVersion = needed
	case m.FormatVersion < needed || m.FormatVersion > FormatVersion:
		return nil, fmt.Errorf("checkpoint/store: Complete: Metadata.FormatVersion = %d: this checkpoint needs version %d to %d (or pass 0)",
			m.FormatVersion, needed, FormatVersion)
	}
	if err := checkShared(m); err != nil {
		return nil, err
	}
	data, err := format.EncodeMetadata(*m)
	if err != nil {
		return nil, fmt.Errorf("checkpoint/store: Complete: encoding metadata of checkpoint %d: %w", m.ID, err)
	}
	return data, nil
}

// validateLoaded decodes the _metadata contents b read from path, checks
// that it is checkpoint id of kind and that no state file is referenced
// twice, and verifies every state file with readState.
func validateLoaded(path string, b []byte, id checkpoint.ID, kind checkpoint.Kind, readState func(checkpoint.StateHandle) error) (*checkpoint.Metadata, error) {
	m, err := format.DecodeMetadata(path, b)
	if err != nil {
		return nil, err
	}
	switch {
	case m.ID != id:
		return nil, format.Corruptf(path, "records id %d but the directory is for id %d", m.ID, id)
	case m.Kind != kind:
		return nil, format.Corruptf(path, "records kind %q but the directory is for a %s", m.Kind, kind)
	}
	if err := checkShared(&m); err != nil {
		return nil, format.Corruptf(path, "%v", err)
	}
	files := map[string]bool{}
	for _, op := range m.Operators {
		for _, h := range op.Subtasks {
			if files[h.File] {
				return nil, format.Corruptf(path, "state file %q is referenced twice", h.File)
			}
			files[h.File] = true
			if err := readState(h); err != nil {
				return nil, err
			}
		}
	}
	return &m, nil
}

// checkShared checks the shared files of m's state handles: valid names,
// sorted, each listed once per handle with one size and checksum across
// the checkpoint, and none in a savepoint, which must be self-contained.
func checkShared(m *checkpoint.Metadata) error {
	seen := map[string]checkpoint.SharedFile{}
	for _, op := range m.Operators {
		for _, h := range op.Subtasks {
			if len(h.Shared) > 0 && m.Kind == checkpoint.KindSavepoint {
				return fmt.Errorf("checkpoint/store: savepoint %d: operator %q subtask %d lists shared files: a savepoint holds full snapshots only", m.ID, op.Name, h.Subtask)
			}
			for i, f := range h.Shared {
				if !format.ValidSharedName(f.Name) || f.Size < 0 || i > 0 && h.Shared[i-1].Name >= f.Name {
					return fmt.Errorf("checkpoint/store: operator %q subtask %d: shared file %q (size %d) is not a valid name in increasing order", op.Name, h.Subtask, f.Name, f.Size)
				}
				if prev, ok := seen[f.Name]; ok && prev != f {
					return fmt.Errorf("checkpoint/store: shared file %q is listed with two sizes or checksums", f.Name)
				}
				seen[f.Name] = f
			}
		}
	}
	return nil
}

// checkHandle checks a state handle read from the metadata at metaPath
// before its file, statePath, is read.
func checkHandle(metaPath, statePath string, h checkpoint.StateHandle) error {
	if !validStateFile(h.File) {
		return format.Corruptf(metaPath, "state file name %q of subtask %d is not a plain file name", h.File, h.Subtask)
	}
	if h.Size < format.EnvelopeSize {
		return format.Corruptf(statePath, "recorded size %d is smaller than the %d-byte envelope", h.Size, format.EnvelopeSize)
	}
	return nil
}

// decodeStateFile verifies the state file contents b read from path
// against its handle (size, checksum) and decodes them.
func decodeStateFile(path string, b []byte, h checkpoint.StateHandle) (checkpoint.SubtaskSnapshot, error) {
	if int64(len(b)) != h.Size {
		return checkpoint.SubtaskSnapshot{}, format.Corruptf(path, "file is %d bytes, the metadata records %d (truncated or overwritten?)", len(b), h.Size)
	}
	if got := format.Checksum(b); got != h.CRC32C {
		return checkpoint.SubtaskSnapshot{}, format.Corruptf(path, "checksum mismatch: the metadata records %08x, the file hashes to %08x", h.CRC32C, got)
	}
	snap, err := format.DecodeState(path, b)
	if err != nil {
		return checkpoint.SubtaskSnapshot{}, err
	}
	if !slices.Equal(format.SharedFilesOf(snap.DBs), h.Shared) {
		return checkpoint.SubtaskSnapshot{}, format.Corruptf(path, "the shared files it refers to differ from those the metadata lists for it")
	}
	return snap, nil
}

// parseCheckpointDir returns the id and kind of a checkpoint directory
// named base (chk-… or sp-…); where names it in the error.
func parseCheckpointDir(where, base string) (checkpoint.ID, checkpoint.Kind, error) {
	if id, ok := parseDirName(base, chkPrefix); ok {
		return id, checkpoint.KindCheckpoint, nil
	}
	if id, ok := parseDirName(base, spPrefix); ok {
		return id, checkpoint.KindSavepoint, nil
	}
	return 0, "", fmt.Errorf("checkpoint/store: Load %s: not a checkpoint or savepoint directory: pass a directory named %s<%d digits> or %s<%d digits>",
		where, chkPrefix, idDigits, spPrefix, idDigits)
}
