package store

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/exactlyonce/exactly/checkpoint"
)

// Names in the store directory.
const (
	idsFile        = "_ids"
	metadataFile   = "_metadata"
	tmpSuffix      = ".tmp"
	savepointsDir  = "savepoints"
	chkPrefix      = "chk-"
	spPrefix       = "sp-"
	idDigits       = 20 // enough for any uint64
	stateSuffix    = ".state"
	maxEscapedName = 200 // keeps state file names under the usual 255-byte limit
	hashedPrefix   = 160
)

func dirPrefix(kind checkpoint.Kind) string {
	if kind == checkpoint.KindSavepoint {
		return spPrefix
	}
	return chkPrefix
}

func dirName(id checkpoint.ID, kind checkpoint.Kind) string {
	return fmt.Sprintf("%s%0*d", dirPrefix(kind), idDigits, id)
}

// parseDirName returns the id in a directory name made by dirName with the
// given prefix. Other names are not ours: ok is false.
func parseDirName(name, prefix string) (id checkpoint.ID, ok bool) {
	digits, found := strings.CutPrefix(name, prefix)
	if !found || len(digits) != idDigits || strings.ContainsAny(digits, "+-") {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	return checkpoint.ID(v), err == nil
}

// stateFileName returns the name of the state file of one subtask of an
// operator: "<escaped operator>-<subtask>.state".
//
// Operator names may hold any bytes. Lower-case ASCII letters, digits, '-',
// '.' and '_' (except first: names starting with '_' are the store's own) are
// kept and every other byte becomes %XX (upper-case hex), so the name is safe
// on every filesystem, including case-insensitive ones, and distinct
// operators get distinct names (the subtask follows the last '-').
// An escaped name longer than maxEscapedName bytes is cut and suffixed with
// '~' and a SHA-256 of the full name; '~' is always escaped otherwise, so a
// cut name cannot collide with an uncut one.
func stateFileName(operator string, subtask int) string {
	var b strings.Builder
	for i := 0; i < len(operator); i++ {
		c := operator[i]
		if 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' && i > 0 {
			b.WriteByte(c)
		} else {
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	name := b.String()
	if len(name) > maxEscapedName {
		sum := sha256.Sum256([]byte(operator))
		name = name[:hashedPrefix] + "~" + hex.EncodeToString(sum[:16])
	}
	return name + "-" + strconv.Itoa(subtask) + stateSuffix
}

// validStateFile reports whether name, from a state handle, is a plain file
// name in the checkpoint directory that is not one of the store's own files.
func validStateFile(name string) bool {
	return name != "" && name != "." && name != ".." &&
		!strings.ContainsAny(name, `/\`+"\x00") && !strings.HasPrefix(name, "_")
}
