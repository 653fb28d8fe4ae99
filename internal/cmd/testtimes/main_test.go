package main

import (
	"strings"
	"testing"
)

const log = `{"Time":"2026-12-03T15:00:00Z","Action":"start","Package":"a"}
{"Time":"2026-12-03T15:00:01Z","Action":"run","Package":"a","Test":"TestSlow"}
{"Time":"2026-12-03T15:00:09Z","Action":"pass","Package":"a","Test":"TestSlow/sub","Elapsed":7}
{"Time":"2026-12-03T15:00:09Z","Action":"pass","Package":"a","Test":"TestSlow","Elapsed":8}
{"Time":"2026-12-03T15:00:09Z","Action":"fail","Package":"a","Test":"TestBroken","Elapsed":0.5}
{"Time":"2026-12-03T15:00:10Z","Action":"fail","Package":"a","Elapsed":10}
# a build failure's output
{"Time":"2026-12-03T15:00:01Z","Action":"skip","Package":"b","Test":"TestNeedsKafka","Elapsed":0}
{"Time":"2026-12-03T15:00:30Z","Action":"pass","Package":"b","Elapsed":29.5}
`

func TestSummarize(t *testing.T) {
	s, err := summarize(strings.NewReader(log))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.packages) != 2 || s.packages[0].name != "b" || s.packages[0].seconds != 29.5 || s.packages[1].seconds != 10 {
		t.Errorf("packages = %+v, want b (29.5 s) before a (10 s)", s.packages)
	}
	if len(s.tests) != 3 || s.tests[0].name != "a TestSlow" || s.tests[0].seconds != 8 {
		t.Errorf("tests = %+v, want a TestSlow (8 s) first and no subtests", s.tests)
	}
	if s.wall.Seconds() != 30 {
		t.Errorf("wall = %v, want 30s", s.wall)
	}
	var out strings.Builder
	s.write(&out, 1)
	for _, want := range []string{"30 s; 2 packages, 3 tests; FAILED: a TestBroken, a", "| b | 29.5 |", "| a TestSlow | 8.0 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "TestBroken |") {
		t.Errorf("output lists more than the top 1 test:\n%s", out.String())
	}
}
