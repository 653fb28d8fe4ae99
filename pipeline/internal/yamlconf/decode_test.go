package yamlconf

import (
	"testing"
	"time"
)

type inner struct {
	Kind  string        `yaml:"kind" kind:"true" required:"true" enum:"a,b" doc:"kind"`
	Size  time.Duration `yaml:"size" kinds:"a" default:"1s" doc:"size"`
	Count int           `yaml:"count" kinds:"b" required:"b" doc:"count"`
}

type root struct {
	Name  string  `yaml:"name" required:"true" doc:"name"`
	Expr  Text    `yaml:"expr" doc:"an expression"`
	Map   Entries `yaml:"map" doc:"a mapping"`
	Inner inner   `yaml:"inner" doc:"inner"`
	List  []inner `yaml:"list" doc:"list"`
}

func noEnv(string) (string, bool) { return "", false }

func TestTextPositions(t *testing.T) {
	src := "name: x\n" +
		"expr: \"a + b\"\n" +
		"map:\n" +
		"  plain: c * d\n" +
		"  block: |\n" +
		"    e +\n" +
		"      f\n" +
		"inner: {kind: a}\n"
	var r root
	if _, err := Decode("f.yaml", []byte(src), &r, noEnv); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		what      string
		t         Text
		line, col int
		want      Pos
	}{
		{"quoted", r.Expr, 1, 4, Pos{2, 12}},
		{"plain", r.Map[0].Value, 1, 2, Pos{4, 12}},
		{"block, line 1", r.Map[1].Value, 1, 2, Pos{6, 7}},
		{"block, line 2", r.Map[1].Value, 2, 2, Pos{7, 7}},
		{"sub", r.Map[0].Value.Sub(4, 5), 1, 0, Pos{4, 14}},
	} {
		if got := tc.t.At(tc.line, tc.col); got != tc.want {
			t.Errorf("%s: At(%d, %d) = %v, want %v", tc.what, tc.line, tc.col, got, tc.want)
		}
	}
	if r.Inner.Size != time.Second {
		t.Errorf("the default size is %v, want 1s", r.Inner.Size)
	}
}

func TestSubstitution(t *testing.T) {
	env := func(name string) (string, bool) {
		v, ok := map[string]string{"SET": "v", "EMPTY": ""}[name]
		return v, ok
	}
	for in, want := range map[string]string{
		"${SET}": "v", "a${SET}b${SET}": "avbv", "${UNSET:-d}": "d", "${EMPTY:-d}": "d", "${SET:-d}": "v", "$SET": "$SET",
	} {
		if got, err := substitute(in, env); err != nil || got != want {
			t.Errorf("substitute(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"${UNSET}", "${1X}", "${SET"} {
		if got, err := substitute(in, env); err == nil {
			t.Errorf("substitute(%q) = %q, want an error", in, got)
		}
	}
}

func TestKindsAndRequired(t *testing.T) {
	var r root
	_, err := Decode("f.yaml", []byte("name: x\ninner: {kind: b, size: 2s}\nlist:\n  - {kind: c}\n"), &r, noEnv)
	want := "f.yaml:2:9: inner lacks required field \"count\" (kind b): add it\n" +
		"f.yaml:2:18: inner.size applies to kind a only, not to kind \"b\": remove it\n" +
		"f.yaml:4:12: list[0].kind is \"c\": use one of a, b"
	if err == nil || err.Error() != want {
		t.Errorf("error:\n%v\nwant:\n%s", err, want)
	}
}
