package store

import (
	"errors"
	"fmt"

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

// encodeMetadataFile checks m (setting FormatVersion 0 to FormatVersion)
// and returns the contents of its _metadata file.
func encodeMetadataFile(m *checkpoint.Metadata) ([]byte, error) {
	if err := checkKind(m.Kind); err != nil {
		return nil, err
	}
	if m.FormatVersion == 0 {
		m.FormatVersion = FormatVersion
	}
	if m.FormatVersion != FormatVersion {
		return nil, fmt.Errorf("checkpoint/store: Complete: Metadata.FormatVersion = %d: this build writes version %d (or pass 0)",
			m.FormatVersion, FormatVersion)
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
func validateLoaded(path string, b []byte, id uint64, kind checkpoint.Kind, readState func(checkpoint.StateHandle) error) (*checkpoint.Metadata, error) {
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
	return format.DecodeState(path, b)
}

// parseCheckpointDir returns the id and kind of a checkpoint directory
// named base (chk-… or sp-…); where names it in the error.
func parseCheckpointDir(where, base string) (uint64, checkpoint.Kind, error) {
	if id, ok := parseDirName(base, chkPrefix); ok {
		return id, checkpoint.KindCheckpoint, nil
	}
	if id, ok := parseDirName(base, spPrefix); ok {
		return id, checkpoint.KindSavepoint, nil
	}
	return 0, "", fmt.Errorf("checkpoint/store: Load %s: not a checkpoint or savepoint directory: pass a directory named %s<%d digits> or %s<%d digits>",
		where, chkPrefix, idDigits, spPrefix, idDigits)
}
