package pipeline

import (
	"os"
	"testing"

	"github.com/exactlyonce/exactly/pipeline/internal/config"
)

// TestReferenceIsGenerated fails when docs/pipelines.md differs from the
// reference generated from the schema the decoder uses: run
// go generate ./pipeline.
func TestReferenceIsGenerated(t *testing.T) {
	got, err := os.ReadFile("../docs/pipelines.md")
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != config.Reference() {
		t.Fatal("docs/pipelines.md is not the reference generated from pipeline/internal/config: run go generate ./pipeline and commit the result")
	}
}
