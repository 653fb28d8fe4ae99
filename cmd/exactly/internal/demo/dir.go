package demo

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// dirMarker is the file that marks a directory as the demo's own: only a
// directory that holds it is cleared for a fresh run.
const dirMarker = ".exactly-demo"

// PrepareDir readies dir for a run: a new or empty directory is created
// and marked as the demo's; one the demo marked is cleared first, unless
// resume keeps its checkpoints and output. A directory with files the
// demo did not create is refused: the demo deletes nothing of anyone
// else's.
func PrepareDir(dir string, resume bool) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("demo: --dir %s: %w", dir, err)
	case len(entries) == 0:
	default:
		if _, err := os.Stat(filepath.Join(dir, dirMarker)); err != nil {
			return fmt.Errorf("demo: --dir %s is not empty and the demo did not create it (no %s in it): give a new or empty directory", dir, dirMarker)
		}
		if resume {
			return nil
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("demo: clearing --dir %s: %w", dir, err)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("demo: --dir %s: %w", dir, err)
	}
	return os.WriteFile(filepath.Join(dir, dirMarker), []byte("created by exactly demo: cleared at every run without --resume\n"), 0o644)
}
