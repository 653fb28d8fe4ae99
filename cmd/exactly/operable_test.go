package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDefaultRunIsOperable: two pipelines started with exactly run and no
// control flag both run (the second one's default port was taken: it
// failed with "address already in use"), and each is savepointed and
// stopped by its local user with no token flag (the commands answered 403,
// or refused for lack of --token-file): each job has a token of its own,
// in a file only its user can read, which the commands find.
func TestDefaultRunIsOperable(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir := t.TempDir()
	t.Chdir(dir)
	var jobs []*runningExactly
	var addrs []string
	for _, name := range []string{"operable-a", "operable-b"} {
		p := filepath.Join(dir, name+".yaml")
		yaml := fmt.Sprintf(`name: %s
source: {kind: generator, count: 0, rate: 200, fields: {n: index}}
sink: {kind: file, dir: out-%s}
checkpoint: {interval: 100ms}
`, name, name)
		if err := os.WriteFile(p, []byte(yaml), 0o644); err != nil {
			t.Fatal(err)
		}
		r := startExactly(t, "run", p, "--log-level", "warn")
		line := r.waitLine(t, "control API and web page: http://")
		addr := strings.TrimSuffix(strings.TrimPrefix(strings.Fields(line)[5], "http://"), "/")
		r.waitLine(t, "savepoint and stop: exactly savepoint --addr "+addr)
		jobs, addrs = append(jobs, r), append(addrs, addr)
	}
	if addrs[0] == addrs[1] {
		t.Fatalf("both jobs serve %s", addrs[0])
	}
	token, err := localTokenPath("operable-a")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(token); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the local token %s: %v, mode %v; want a file only its user can read", token, err, st.Mode())
	}
	sp := runExactly(t, "savepoint", "--addr", addrs[0])
	if sp.code != 0 || !strings.Contains(sp.stdout, "savepoint") {
		t.Fatalf("savepoint without a token flag: exit %d\n%s%s", sp.code, sp.stdout, sp.stderr)
	}
	t.Logf("addrs %v; savepoint: %s", addrs, sp.stdout)
	for i, r := range jobs {
		stop := runExactly(t, "stop", "--addr", addrs[i])
		if stop.code != 0 {
			t.Fatalf("stop %s without a token flag: exit %d\n%s%s", addrs[i], stop.code, stop.stdout, stop.stderr)
		}
		r.waitLine(t, "stopped, the output of its last checkpoint committed")
		<-r.done
		if r.err != nil {
			t.Fatalf("job %d after stop: %v", i, r.err)
		}
	}
}
