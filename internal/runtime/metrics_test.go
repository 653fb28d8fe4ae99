package runtime

import (
	"testing"
	"time"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/format"
)

// TestCheckpointStatsBytes checks what a checkpoint's stats count: the
// state files always; the shared files each once, whatever the number of
// subtasks listing them; as uploaded only those named after its own id.
func TestCheckpointStatsBytes(t *testing.T) {
	reused := checkpoint.SharedFile{Name: format.SharedName(3, "a-000004.sst"), Size: 1000}
	uploaded := checkpoint.SharedFile{Name: format.SharedName(7, "a-000009.sst"), Size: 30}
	other := checkpoint.SharedFile{Name: format.SharedName(7, "b-000005.sst"), Size: 5}
	md := &checkpoint.Metadata{ID: 7, Operators: []checkpoint.OperatorState{
		{Name: "source", Subtasks: []checkpoint.StateHandle{{Size: 40}}},
		{Name: "keyed", Subtasks: []checkpoint.StateHandle{
			{Subtask: 0, Size: 200, Shared: []checkpoint.SharedFile{reused, uploaded}},
			// A database two subtasks adopted after a rescale: its files are listed twice.
			{Subtask: 1, Size: 300, Shared: []checkpoint.SharedFile{reused, other}},
		}},
	}}
	done := time.Unix(100, 0)
	s := newCheckpointStats(md, done)
	want := CheckpointStats{ID: 7, Completed: done, StateBytes: 540, SharedBytes: 1035, UploadedBytes: 575}
	if *s != want {
		t.Errorf("stats %+v, want %+v", *s, want)
	}
	full := newCheckpointStats(&checkpoint.Metadata{ID: 2, Operators: md.Operators[:1]}, done)
	if full.SharedBytes != 0 || full.UploadedBytes != full.StateBytes {
		t.Errorf("a full checkpoint's stats %+v: want no shared bytes and everything uploaded", *full)
	}
}
