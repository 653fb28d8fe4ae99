package main

import (
	"context"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"testing"
)

func TestDemoRunsAndVerifies(t *testing.T) {
	var out strings.Builder
	dir := filepath.Join(t.TempDir(), "demo")
	err := runDemo(context.Background(), []string{"--dir", dir, "--events", "5000", "--customers", "20", "--interval", "20ms"}, &out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	for _, want := range []string{"5000 orders in, 20 customers", "sqlite", "files", "result: PASS"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}

func TestDemoFlagErrorsNameTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--events", "0"}, "--events is 0"},
		{[]string{"--parallelism", "0"}, "--parallelism is 0"},
		{[]string{"--interval", "0s"}, "--interval is 0s"},
		{[]string{"--chaos", "-1"}, "--chaos is -1"},
		{[]string{"--customers", "-3"}, "--customers is -3"},
		{[]string{"stray"}, `unexpected argument "stray"`},
	} {
		var out strings.Builder
		_, err := parseDemoFlags(tc.args, &out)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("parseDemoFlags(%q) = %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestDemoHelpExplainsFlags(t *testing.T) {
	var out strings.Builder
	_, err := parseDemoFlags([]string{"--help"}, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("--help: err = %v", err)
	}
	for _, want := range []string{"--chaos", "SIGKILL", "verification report", "-interval"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help lacks %q:\n%s", want, out.String())
		}
	}
}
