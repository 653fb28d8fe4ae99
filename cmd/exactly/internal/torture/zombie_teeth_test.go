package torture

import (
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
)

// TestCheckerCatchesZombieCommit shows that the checker would catch a
// zombie that commits: the engine fences a paused process that lost
// ownership (the zombie fault), and there is no way to switch the fencing
// off — nor should there be — so the output such a zombie would leave is
// built here by hand, in the file sink's layout, as the real run would
// leave it.
//
// The story, per subtask: the zombie prepared checkpoint k (its pending
// file holds the records since checkpoint k-1) and was paused before k
// completed. The new owner restored checkpoint k-1, replayed the same
// records and committed them under its own, higher ids (ids never repeat
// in a directory). Had the resumed zombie committed k, its pending file
// would be visible too. The checker must report each of those records as
// a duplicate and nothing else; without the zombie's file, nothing.
func TestCheckerCatchesZombieCommit(t *testing.T) {
	x := NewExpected(teethWorkload)
	const subtasks, perCheckpoint = 2, 100
	// The committed records of each subtask in order: every event of the
	// keys the subtask owns, with its running total.
	streams := make([][]Out, subtasks)
	for i, e := range x.events {
		s := crc32.ChecksumIEEE([]byte(e.Key)) % subtasks
		streams[s] = append(streams[s], Out{Event: e, Total: x.running[i]})
	}
	write := func(dir string, subtask int, id checkpoint.ID, recs []Out) {
		var b strings.Builder
		for _, o := range recs {
			b.Write(appendOut(nil, o))
			b.WriteByte('\n')
		}
		name := fmt.Sprintf("out-files-%04d-%020d.csv", subtask, id)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// layout writes the output of a run in which the zombie of each
	// subtask paused after preparing its checkpoint zombieAt, and the new
	// owner restored zombieAt-1 and went on from id newIDs; committed
	// tells whether the zombie's transaction became visible.
	const zombieAt, newIDs = 4, 10
	layout := func(committed bool) (dir string, zombieRecords int) {
		dir = t.TempDir()
		for s, recs := range streams {
			var chunks [][]Out
			for len(recs) > 0 {
				n := min(perCheckpoint, len(recs))
				chunks, recs = append(chunks, recs[:n]), recs[n:]
			}
			if len(chunks) <= zombieAt {
				t.Fatalf("subtask %d has %d checkpoints of output, want more than %d", s, len(chunks), zombieAt)
			}
			for i := range zombieAt - 1 { // checkpoints 1 .. zombieAt-1, committed by the zombie while it owned the job
				write(dir, s, checkpoint.ID(i+1), chunks[i])
			}
			if committed {
				write(dir, s, zombieAt, chunks[zombieAt-1])
				zombieRecords += len(chunks[zombieAt-1])
			}
			for i := zombieAt - 1; i < len(chunks); i++ { // the new owner's replay and the rest
				write(dir, s, checkpoint.ID(newIDs+i), chunks[i])
			}
		}
		return dir, zombieRecords
	}

	dir, _ := layout(false)
	res, err := CheckFiles(x, "files", dir)
	if err != nil {
		t.Fatal(err)
	}
	if res.Anomalies() != 0 || res.Verified != len(x.events) {
		t.Fatalf("fenced zombie: %v %v; want no anomaly", res, res.Examples)
	}

	dir, n := layout(true)
	res, err = CheckFiles(x, "files", dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Log(res)
	if res.Duplicates != n || res.Anomalies() != n || res.Verified != len(x.events) || n == 0 {
		t.Errorf("zombie that committed checkpoint %d (%d records): %v; want exactly %d duplicates and no other anomaly", zombieAt, n, res, n)
	}
}
