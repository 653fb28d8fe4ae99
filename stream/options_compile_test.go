package stream_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMisplacedOptionDoesNotCompile: an option given to an operator kind it
// does not apply to is a compile error, not a silent change (a Name given
// to a sink would rename it and orphan its checkpointed transactions).
func TestMisplacedOptionDoesNotCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles a program")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	for _, c := range []struct{ name, call, want string }{
		{"control: options where they apply", `_ = nums`, ""},
		{"name on a sink", `stream.SinkTo(nums, "out", sk, stream.Name("x"))`, "does not implement stream.SinkOption"},
		{"name on a source", `stream.Source(j, "nums", src, stream.Name("x"))`, "does not implement stream.SourceOption"},
		{"name on a keyed operator", `stream.Process(stream.KeyBy(nums, func(v int) int { return v }, state.IntCodec{}), "p", setup, stream.Name("x"))`, "does not implement stream.KeyedOption"},
		{"lateness on a process function", `stream.Process(stream.KeyBy(nums, func(v int) int { return v }, state.IntCodec{}), "p", setup, stream.AllowedLateness(time.Second))`, "does not implement stream.KeyedOption"},
		{"state TTL on an interval join", `k := stream.KeyBy(nums, func(v int) int { return v }, state.IntCodec{}); stream.IntervalJoin(k, k, "j", stream.Interval{}, stream.JoinInputs[int, int]{}, func(int, int, int) int { return 0 }, stream.StateTTL(state.TTL{After: time.Second}))`, "does not implement stream.KeyedOption"},
		{"lateness on an inner join", `k := stream.KeyBy(nums, func(v int) int { return v }, state.IntCodec{}); stream.InnerJoin(k, k, "j", stream.JoinInputs[int, int]{}, func(int, int, int) int { return 0 }, stream.AllowedLateness(time.Second))`, "does not implement stream.JoinOption"},
		{"lateness on a map", `stream.Map(nums, func(v int) int { return v }, stream.AllowedLateness(time.Second))`, "does not implement stream.TransformOption"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			prog := `package main

import (
	"github.com/exactlyonce/exactly/sink"
	"github.com/exactlyonce/exactly/source"
	"github.com/exactlyonce/exactly/state"
	"github.com/exactlyonce/exactly/stream"
	"time"
)

var _ state.IntCodec
var _ = time.Second

func main() {
	var (
		src   source.Source[int]
		sk    sink.Sink[int]
		setup func(*stream.Context[int]) (stream.ProcessFunc[int, int, int], error)
	)
	j := stream.New("job")
	nums := stream.Source(j, "nums", src, stream.Parallelism(2))
	stream.SinkTo(stream.Map(nums, func(v int) int { return v }, stream.Name("m"), stream.Parallelism(2)), "ok", sk, stream.Parallelism(2))
	_ = setup
	` + c.call + `
}
`
			if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(prog), 0o644); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(goBin, "vet", filepath.Join(dir, "main.go"))
			out, err := cmd.CombinedOutput()
			if c.want == "" {
				if err != nil {
					t.Fatalf("the control program does not compile:\n%s", out)
				}
				return
			}
			if err == nil {
				t.Fatalf("%s compiles; want a type error", c.call)
			}
			if !strings.Contains(string(out), c.want) {
				t.Fatalf("%s: the compiler said\n%s\nwant %q", c.call, out, c.want)
			}
		})
	}
}
