package store

import (
	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// ErrCorrupt marks every error about a checkpoint file that is missing,
// truncated, fails its checksum or cannot be decoded. It is
// [checkpoint.ErrCorrupt]. Test with errors.Is.
var ErrCorrupt = checkpoint.ErrCorrupt

// ErrNewerVersion marks an intact file written in a format version this build
// does not know, by a newer version of exactly. It is not corruption: the
// checkpoint is probably fine, and skipping it would silently roll the job
// back, so [Store.Latest] returns this error instead of falling back.
var ErrNewerVersion = format.ErrNewerVersion

// FormatVersion is the version of [checkpoint.Metadata] and of the file
// envelope this package writes. It is the highest version it reads. The
// encodings are those of package internal/format.
const FormatVersion = format.Version
