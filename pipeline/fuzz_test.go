package pipeline

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/pipeline/internal/yamlconf"
)

// positioned matches one line of a Parse error: file:line:col: message.
var positioned = regexp.MustCompile(`^p\.yaml:[1-9][0-9]*:[1-9][0-9]*: \S`)

// FuzzParse feeds Parse arbitrary files, seeded with the examples and the
// bad pipelines of TestErrorsNamePositionAndFix: it must never panic, and
// every error must be a list of positioned problems, one per line.
func FuzzParse(f *testing.F) {
	examples, _ := filepath.Glob("../examples/*.yaml")
	for _, path := range examples {
		data, err := os.ReadFile(path)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, tc := range badPipelines {
		f.Add([]byte(tc.yaml))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := Parse("p.yaml", data, env)
		if err == nil {
			return
		}
		var es yamlconf.Errors
		if !errors.As(err, &es) {
			t.Fatalf("error is a %T, not a yamlconf.Errors: %v", err, err)
		}
		for _, line := range strings.Split(err.Error(), "\n") {
			if !positioned.MatchString(line) {
				t.Errorf("error line %q does not start with p.yaml:line:col", line)
			}
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error shows the value of $SECRET: %v", err)
		}
	})
}
