package pipeline

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// deadPipeline maps a generated field with an expression that fails at
// run time for one record of three.
const deadPipeline = `
name: dead
source:
  kind: generator
  count: 6
  splits: 1
  fields: {s: 'index % 3 == 1 ? "x" + string(index) : string(index)'}
transforms:
  - map: {n: int(s)}
sink: {kind: file, dir: out}
`

func TestRuntimeErrorsAreDeadLetters(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	p, err := Parse("dead.yaml", []byte(deadPipeline+"dead_letters: {kind: file, dir: dead}\n"), env)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Run(context.Background(), RunOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	}
	if got, want := committedLines(t, filepath.Join(dir, "out")), []string{`{"n":0}`, `{"n":2}`, `{"n":3}`, `{"n":5}`}; !slices.Equal(got, want) {
		t.Errorf("records %q, want %q", got, want)
	}
	want := []string{
		`{"stage":"transforms[0].map.n","error":"int(s): invalid operation: int(x1)","value":"{\"s\":\"x1\"}"}`,
		`{"stage":"transforms[0].map.n","error":"int(s): invalid operation: int(x4)","value":"{\"s\":\"x4\"}"}`,
	}
	if got := committedLines(t, filepath.Join(dir, "dead")); !slices.Equal(got, want) {
		t.Errorf("dead letters:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestWithoutDeadLettersABadRecordStopsTheJob(t *testing.T) {
	t.Chdir(t.TempDir())
	p, err := Parse("dead.yaml", []byte(deadPipeline), env)
	if err != nil {
		t.Fatal(err)
	}
	err = p.Run(context.Background(), RunOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	want := `a record failed at transforms[0].map.n: int(s): invalid operation: int(x1) (record {"s":"x1"}): fix the input or the pipeline, or add a dead_letters sink to keep such records aside`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %v, want one containing %s", err, want)
	}
	if got := committedLines(t, "out"); len(got) != 0 {
		t.Errorf("the stopped job committed %q", got)
	}
}
