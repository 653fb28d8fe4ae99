package file

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/checkpoint"
	"github.com/exactlyonce/exactly/internal/vfs"
	"github.com/exactlyonce/exactly/sink"
)

func appendInt(dst []byte, v int) []byte { return strconv.AppendInt(dst, int64(v), 10) }

func newIntSink(t testing.TB, dir string) *Sink[int] {
	t.Helper()
	s, err := NewSink(dir, appendInt, SinkOptions{Suffix: ".jsonl"})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newWriter(t testing.TB, s *Sink[int], name string, subtask int) sink.Writer[int] {
	t.Helper()
	w, err := s.NewWriter(context.Background(), sink.WriterInfo{Sink: name, Subtask: subtask, Parallelism: subtask + 1})
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func newCommitter(t testing.TB, s *Sink[int], name string) sink.Committer {
	t.Helper()
	c, err := s.NewCommitter(context.Background(), sink.CommitterInfo{Sink: name})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// writePrepare writes batch and prepares checkpoint cp.
func writePrepare(t testing.TB, w sink.Writer[int], subtask int, cp checkpoint.ID, batch ...int) sink.Committable {
	t.Helper()
	ctx := context.Background()
	if err := w.Write(ctx, batch); err != nil {
		t.Fatal(err)
	}
	data, err := w.Prepare(ctx, cp)
	if err != nil || data == nil {
		t.Fatalf("Prepare(%d) = %q, %v", cp, data, err)
	}
	return sink.Committable{Checkpoint: cp, Subtask: subtask, Data: data}
}

// visible returns the lines of the non-hidden files in dir, in name order.
func visible(t *testing.T, dir string) []string {
	t.Helper()
	return visibleOn(t, vfs.Default, dir)
}

// visibleOn is visible on the filesystem fsys.
func visibleOn(t *testing.T, fsys vfs.FS, dir string) []string {
	t.Helper()
	all, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, name := range all {
		if strings.HasPrefix(name, ".") {
			continue
		}
		f, err := fsys.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		if err := errors.Join(err, f.Close()); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Fields(string(b))...)
	}
	return lines
}

// names returns the names of the entries of dir, except the sinks' owner
// files and their locks (see sink_owner.go), which stay.
func names(t *testing.T, dir string) []string {
	t.Helper()
	return namesOn(t, vfs.Default, dir)
}

// namesOn is names on the filesystem fsys.
func namesOn(t *testing.T, fsys vfs.FS, dir string) []string {
	t.Helper()
	all, err := fsys.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range all {
		if !strings.HasSuffix(n, "-"+ownerFileName) && !strings.HasSuffix(n, "-"+ownerFileName+ownerLockExt) {
			out = append(out, n)
		}
	}
	return out
}

func TestSinkVisibleOnlyAfterCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newIntSink(t, dir)
	w := newWriter(t, s, "out", 3)
	if got, err := w.Prepare(ctx, 1); got != nil || err != nil {
		t.Fatalf("Prepare with nothing written = %q, %v; want nil, nil", got, err)
	}
	if len(names(t, dir)) != 0 {
		t.Fatalf("files before the first Write: %q", names(t, dir))
	}
	cm := writePrepare(t, w, 3, 2, 1, 2, 3)
	if got := visible(t, dir); len(got) != 0 {
		t.Fatalf("visible before Commit: %q", got)
	}
	if err := w.Write(ctx, []int{4}); err != nil {
		t.Fatal(err)
	}
	c := newCommitter(t, s, "out")
	if err := c.Commit(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if got := visible(t, dir); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Fatalf("visible after Commit = %q", got)
	}
	if !slices.Contains(names(t, dir), "part-out-0003-00000000000000000002.jsonl") {
		t.Errorf("final file name not found in %q", names(t, dir))
	}
	// Duplicate Commit is a no-op.
	if err := c.Commit(ctx, cm); err != nil {
		t.Fatalf("second Commit: %v", err)
	}
	if got := visible(t, dir); !slices.Equal(got, []string{"1", "2", "3"}) {
		t.Fatalf("visible after second Commit = %q", got)
	}
	// Close discards the unprepared record 4.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if n := len(names(t, dir)); n != 1 {
		t.Errorf("files after Close: %q, want only the final file", names(t, dir))
	}
}

func TestSinkCommitAfterCrash(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	w := newWriter(t, newIntSink(t, dir), "out", 0)
	cm1 := writePrepare(t, w, 0, 1, 10, 11)
	cm2 := writePrepare(t, w, 0, 2, 12)
	if err := w.Write(ctx, []int{13}); err != nil {
		t.Fatal(err)
	}
	// Crash: the writer is never closed. A new process restores checkpoint 1,
	// commits its committable, then aborts everything else.
	s2 := newIntSink(t, dir)
	c := newCommitter(t, s2, "out")
	if err := c.Commit(ctx, cm1); err != nil {
		t.Fatal(err)
	}
	if err := c.AbortLingering(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if got := visible(t, dir); !slices.Equal(got, []string{"10", "11"}) {
		t.Fatalf("visible = %q", got)
	}
	if got := names(t, dir); len(got) != 1 {
		t.Fatalf("files left = %q, want only checkpoint 1's final file", got)
	}
	// cm2's data is gone: committing it must fail loudly and permanently.
	err := c.Commit(ctx, cm2)
	if !sink.IsPermanent(err) || !strings.Contains(err.Error(), "prepared data is gone") {
		t.Fatalf("Commit of removed data = %v, want a permanent data-loss error", err)
	}
}

func TestSinkAbortLingeringScope(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newIntSink(t, dir)
	c := newCommitter(t, s, "a/b")
	committed := writePrepare(t, newWriter(t, s, "a/b", 0), 0, 1, 1)
	if err := c.Commit(ctx, committed); err != nil {
		t.Fatal(err)
	}
	var keep []string
	for subtask := range 3 {
		w := newWriter(t, s, "a/b", subtask)
		writePrepare(t, w, subtask, 7, subtask)
		if err := w.Write(ctx, []int{100 + subtask}); err != nil { // left in progress
			t.Fatal(err)
		}
		other := newWriter(t, s, "a", subtask) // another sink, whose name is a prefix
		writePrepare(t, other, subtask, 7, 5)
		if err := other.Write(ctx, []int{6}); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range names(t, dir) {
		if strings.HasPrefix(n, ".part-a-") || !strings.HasPrefix(n, ".") {
			keep = append(keep, n)
		}
	}
	// A file of a sink with another prefix that looks alike.
	lookalike := filepath.Join(dir, ".part-a%2Fb-x-1.pending")
	if err := os.WriteFile(lookalike, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	keep = append(keep, filepath.Base(lookalike))
	if err := c.AbortLingering(ctx, 1); err != nil {
		t.Fatal(err)
	}
	got := names(t, dir)
	slices.Sort(keep)
	if !slices.Equal(got, keep) {
		t.Errorf("after AbortLingering: %q, want %q", got, keep)
	}
}

func TestSinkAbort(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newIntSink(t, dir)
	cm := writePrepare(t, newWriter(t, s, "out", 0), 0, 4, 1)
	c := newCommitter(t, s, "out")
	for range 2 { // aborting twice succeeds
		if err := c.Abort(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	if got := names(t, dir); len(got) != 0 {
		t.Errorf("files after Abort: %q", got)
	}
}

func TestSinkRejectsBadInput(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	if _, err := NewSink(dir, appendInt, SinkOptions{Prefix: "my-part"}); err == nil || !strings.Contains(err.Error(), `Prefix is "my-part"`) {
		t.Errorf("bad prefix: %v", err)
	}
	if _, err := NewSink(dir, appendInt, SinkOptions{Suffix: "/x"}); err == nil || !strings.Contains(err.Error(), "Suffix") {
		t.Errorf("bad suffix: %v", err)
	}
	if _, err := NewSink("", appendInt, SinkOptions{}); err == nil {
		t.Error("empty dir accepted")
	}
	s, err := NewSink(dir, func(dst []byte, v string) []byte { return append(dst, v...) }, SinkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := s.NewWriter(ctx, sink.WriterInfo{Sink: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(ctx, []string{"ok", "a\nb"}); err == nil || !strings.Contains(err.Error(), "record 1") {
		t.Errorf("record with a newline: %v", err)
	}
	c, err := s.NewCommitter(ctx, sink.CommitterInfo{Sink: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for _, data := range []string{`garbage`, `{"pending":"../x","final":"y"}`, `{"pending":"x"}`} {
		if err := c.Commit(ctx, sink.Committable{Data: []byte(data)}); !sink.IsPermanent(err) {
			t.Errorf("Commit(%s) = %v, want a permanent error", data, err)
		}
	}
}

func TestSinkCommitRefusesToOverwrite(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := newIntSink(t, dir)
	c := newCommitter(t, s, "out")
	if err := c.Commit(ctx, writePrepare(t, newWriter(t, s, "out", 0), 0, 1, 1)); err != nil {
		t.Fatal(err)
	}
	// A later run that reuses checkpoint id 1 must not overwrite the output.
	err := c.Commit(ctx, writePrepare(t, newWriter(t, s, "out", 0), 0, 1, 2))
	if !sink.IsPermanent(err) || !strings.Contains(err.Error(), "overwrite") {
		t.Fatalf("Commit over an existing final file = %v", err)
	}
	if got := visible(t, dir); !slices.Equal(got, []string{"1"}) {
		t.Errorf("visible = %q", got)
	}
}

func TestEscapeName(t *testing.T) {
	for in, want := range map[string]string{"": "", "ab_C9": "ab_C9", "a-b": "a%2Db", "a/b.c": "a%2Fb%2Ec", "%": "%25", "é": "%C3%A9"} {
		if got := escapeName(in); got != want {
			t.Errorf("escapeName(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkFileSink(b *testing.B) {
	const rows = 100_000
	ctx := context.Background()
	batch := make([]int, 1000)
	for i := range batch {
		batch[i] = 1_000_000 + i
	}
	s := newIntSink(b, b.TempDir())
	c := newCommitter(b, s, "bench")
	w := newWriter(b, s, "bench", 0)
	cp := checkpoint.ID(0)
	for b.Loop() {
		for range rows / len(batch) {
			if err := w.Write(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		cp++
		data, err := w.Prepare(ctx, cp)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Commit(ctx, sink.Committable{Checkpoint: cp, Data: data}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(rows*b.N)/b.Elapsed().Seconds(), "rows/s")
}
