package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/exactlyonce/exactly/cmd/exactly/internal/demo"
	"github.com/exactlyonce/exactly/stream"
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
		{[]string{"--chaos", "2", "--metrics-addr", "127.0.0.1:0"}, "--metrics-addr and --chaos"},
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

// TestDemoServesMetrics starts the metrics server of --metrics-addr, hands
// it a job's metrics as the demo does when the job starts, and scrapes it.
func TestDemoServesMetrics(t *testing.T) {
	var out strings.Builder
	var cfg demo.Config
	stop, err := serveMetrics("127.0.0.1:0", &cfg, &out)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	var m stream.Metrics
	m.Restarts.Add(2)
	cfg.OnStart(&m)
	url, ok := strings.CutPrefix(strings.TrimSpace(out.String()), "metrics at ")
	if !ok {
		t.Fatalf("no address printed: %q", out.String())
	}
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if want := `exactly_restarts_total{job_name="demo"} 2`; !strings.Contains(string(body), want+"\n") {
		t.Errorf("scrape lacks %q:\n%s", want, body)
	}
	if _, err := serveMetrics("no-port", &cfg, &out); err == nil || !strings.Contains(err.Error(), "--metrics-addr no-port") {
		t.Errorf("a bad address gave %v, want an error naming the flag", err)
	}
}
