package torture

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// CheckFiles checks the committed files of a file sink in dir: visible
// files, read in name order (by subtask, then checkpoint), each subtask's
// files forming one ordered stream. Hidden pending or in-progress files
// left behind count as lingering.
func CheckFiles(x *Expected, name, dir string) (SinkResult, error) {
	return checkFiles(name, dir, parseOut, x.Check)
}

// checkFiles reads the committed files in dir as readFiles does, parses
// each subtask's lines with parse and checks the streams with check.
func checkFiles[T any](name, dir string, parse func(string) (T, error), check func(SinkResult, [][]T) SinkResult) (SinkResult, error) {
	res := SinkResult{Sink: name}
	streams, err := readFiles(&res, dir)
	if err != nil {
		return res, err
	}
	return check(res, parseStreams(&res, streams, parse)), nil
}

// readFiles returns the lines of the committed files of a file sink in
// dir, one stream per subtask (in subtask order), each in checkpoint
// order, and counts in res the uncommitted files left behind.
func readFiles(res *SinkResult, dir string) ([][]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	bySubtask := map[string][]string{}
	for _, e := range entries {
		n := e.Name()
		if strings.HasPrefix(n, ".") {
			if strings.HasSuffix(n, ".pending") || strings.HasSuffix(n, ".inprogress") {
				res.Lingering++
				res.example("uncommitted file %s left behind", n)
			}
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		if len(data) == 0 {
			continue
		}
		// Final names are "{prefix}-{sink}-{subtask:04d}-{checkpoint:020d}{suffix}".
		parts := strings.Split(n, "-")
		subtask := ""
		if len(parts) >= 2 {
			subtask = parts[len(parts)-2]
		}
		bySubtask[subtask] = append(bySubtask[subtask], strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")...)
	}
	var streams [][]string
	for _, st := range slices.Sorted(maps.Keys(bySubtask)) {
		streams = append(streams, bySubtask[st])
	}
	return streams, nil
}
