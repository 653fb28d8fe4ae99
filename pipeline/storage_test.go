package pipeline

import (
	"slices"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint/store"
	"github.com/exactlyonce/exactly/internal/s3test"
)

// TestCheckpointsOnObjectStorage runs a windowed pipeline with its
// checkpoints on the S3 server (checkpoint.storage an s3:// URL) and
// compares its table with a run on a local directory.
func TestCheckpointsOnObjectStorage(t *testing.T) {
	location := s3test.Location(t, "pipeline")
	window := "{kind: tumbling, size: 10s}"
	local := runYAML(t, windowPipeline(window, ""), windowQuery)
	onS3 := runYAML(t, windowPipeline(window, "checkpoint: {interval: 50ms, storage: \""+location+"\"}\n"), windowQuery)
	if len(local) == 0 || !slices.Equal(onS3, local) {
		t.Errorf("with checkpoints on S3:\n%s\nwith a local directory:\n%s", strings.Join(onS3, "\n"), strings.Join(local, "\n"))
	}
	st, err := store.OpenObject(location, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if md, err := st.Latest(); err != nil || md == nil {
		t.Errorf("no checkpoint on S3: %v, %v", md, err)
	}
}
