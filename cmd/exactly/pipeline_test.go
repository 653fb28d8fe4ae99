package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestValidateReportsAValidPipeline(t *testing.T) {
	var out strings.Builder
	if err := runValidate([]string{"../../examples/orders-sqlite.yaml"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"orders-sqlite.yaml: valid", `pipeline "orders-per-minute": generator source`,
		"→ sqlite sink, records key (string), window_start (time), window_end (time), orders (int), total (int)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("validate output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestValidateNamesLineAndColumn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	bad := "name: x\nsource: {kind: generator, count: 1, fields: {a: index}}\ntransforms:\n  - filter: a > b\nsink: {kind: sqlite, path: x.db, table: t}\n"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	err := runValidate([]string{path}, new(strings.Builder))
	want := path + ":4:17: transforms[0].filter: unknown name b: the record's fields are a (int) (see https://expr-lang.org/docs/language-definition)"
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}

func TestRunRunsAPipeline(t *testing.T) {
	example, err := filepath.Abs("../../examples/orders-sqlite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	var out strings.Builder
	if err := runPipeline(context.Background(), []string{example, "--log-level", "warn", "--control-addr", "127.0.0.1:0"}, &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`pipeline "orders-per-minute": finished, output committed`, "control API and web page: http://127.0.0.1:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("run output does not say %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat("orders.db"); err != nil {
		t.Errorf("no output database: %v", err)
	}
}

func TestPipelineCommandErrorsAreOneLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "run: the pipeline file is missing: exactly run pipeline.yaml"},
		{[]string{"--log-level", "warn", "--control-addr", "127.0.0.1:0"}, "run: the pipeline file is missing: exactly run pipeline.yaml"},
		{[]string{"p.yaml", "--log-level", "loud"}, `run: --log-level is "loud": use debug, info, warn or error, such as --log-level warn`},
		{[]string{"p.yaml", "--log-format", "xml"}, `run: --log-format is "xml": use text or json, such as --log-format json`},
		{[]string{"p.yaml", "--nope"}, "run: flag provided but not defined: -nope (run 'exactly run --help' for its flags)"},
		{[]string{"missing.yaml"}, "pipeline: open missing.yaml: no such file or directory: give the path of a pipeline YAML file"},
	} {
		err := runPipeline(context.Background(), tc.args, new(strings.Builder))
		if err == nil || err.Error() != tc.want {
			t.Errorf("run %q: error %v, want %s", tc.args, err, tc.want)
		}
	}
}

func TestRunInterruptedSaysItResumes(t *testing.T) {
	example, err := filepath.Abs("../../examples/orders-sqlite.yaml")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = runPipeline(ctx, []string{example, "--log-level", "error", "--control-addr", "127.0.0.1:0"}, new(strings.Builder))
	want := `run: pipeline "orders-per-minute" interrupted: run it again to resume from its last checkpoint`
	if err == nil || err.Error() != want {
		t.Errorf("error %v, want %s", err, want)
	}
}
