package control

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeJob is a Job that records what the API asked of it.
type fakeJob struct {
	mu         sync.Mutex
	savepoints int
	stops      int
	stopsWith  int
	fail       error
}

func (f *fakeJob) Status() Status {
	return Status{Version: Version, Job: "fake", State: StateRunning, Operators: []Operator{{Name: "src", RecordsIn: 10}}}
}

func (f *fakeJob) Savepoint(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.savepoints++
	return "/cp/savepoints/sp-0000000007", f.fail
}

func (f *fakeJob) StopWithSavepoint(context.Context) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopsWith++
	return "/cp/savepoints/sp-0000000008", f.fail
}

func (f *fakeJob) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stops++
}

func (f *fakeJob) calls() (int, int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.savepoints, f.stops, f.stopsWith
}

func serve(t *testing.T, job Job, token string) string {
	t.Helper()
	ln, err := Listen("127.0.0.1:0", token != "")
	if err != nil {
		t.Fatal(err)
	}
	s := Serve(ln, job, Config{Token: token})
	t.Cleanup(func() { _ = s.Close(context.Background()) })
	return "http://" + s.Addr()
}

// request makes one call and returns its status code, body and headers.
func request(t *testing.T, method, url, auth string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// TestRefusals checks each refusal of a call that changes the job, and
// that a refused call changes nothing.
func TestRefusals(t *testing.T) {
	const token = "s3cret-token"
	job := &fakeJob{}
	base := serve(t, job, token)
	noToken := serve(t, job, "")
	cases := []struct {
		name, method, url, auth string
		code                    int
		body                    string
	}{
		{"savepoint without credentials", "POST", base + "/api/v1/savepoint", "", 401, "send its token"},
		{"stop without credentials", "POST", base + "/api/v1/stop", "", 401, "send its token"},
		{"stop with a savepoint without credentials", "POST", base + "/api/v1/stop?savepoint=true", "", 401, "send its token"},
		{"savepoint with a wrong token", "POST", base + "/api/v1/savepoint", "Bearer nope", 403, "not this job's"},
		{"stop with a wrong token", "POST", base + "/api/v1/stop", "Bearer nope", 403, "not this job's"},
		{"savepoint with the token as Basic", "POST", base + "/api/v1/savepoint", "Basic " + token, 403, "not this job's"},
		{"savepoint on a job without a token", "POST", noToken + "/api/v1/savepoint", "Bearer " + token, 403, "no control token"},
		{"stop on a job without a token", "POST", noToken + "/api/v1/stop", "Bearer anything", 403, "no control token"},
		{"savepoint by GET", "GET", base + "/api/v1/savepoint", "", 405, ""},
		{"a bad savepoint parameter", "POST", base + "/api/v1/stop?savepoint=yes", "Bearer " + token, 400, "savepoint=yes is invalid"},
		{"no metrics handler", "GET", base + "/metrics", "", 404, "metrics.Handler"},
		{"an unknown asset", "GET", base + "/web/nothing.js", "", 404, "the page is at /"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body, h := request(t, c.method, c.url, c.auth)
			if code != c.code || !strings.Contains(body, c.body) {
				t.Fatalf("%s %s: %d %s, want %d with %q", c.method, c.url, code, body, c.code, c.body)
			}
			if code == 401 && h.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
			if strings.Contains(body, token) {
				t.Errorf("the answer carries the token: %s", body)
			}
		})
	}
	if sp, stops, with := job.calls(); sp != 0 || stops != 0 || with != 0 {
		t.Fatalf("refused calls reached the job: %d savepoints, %d stops, %d stops with a savepoint", sp, stops, with)
	}
	// Each part of the status is at its own path, in its own object.
	for _, part := range []string{"graph", "operators", "checkpoints", "restarts", "lag"} {
		_, body, _ := request(t, "GET", base+"/api/v1/"+part, "")
		var got map[string]json.RawMessage
		if err := json.Unmarshal([]byte(body), &got); err != nil || len(got) != 2 || string(got["version"]) != "1" || got[part] == nil {
			t.Errorf("GET /api/v1/%s: %v %s, want {\"version\": 1, %q: ...}", part, err, body, part)
		}
	}
	// Reading needs no token, on either server.
	for _, u := range []string{base, noToken} {
		for _, p := range []string{"/", "/web/app.js", "/web/style.css", "/api/v1/job", "/api/v1/graph", "/api/v1/operators", "/api/v1/checkpoints", "/api/v1/restarts", "/api/v1/lag"} {
			if code, body, _ := request(t, "GET", u+p, ""); code != 200 {
				t.Errorf("GET %s: %d %s", p, code, body)
			}
		}
	}
}

// TestAuthorizedCalls checks that the token lets each call through to the
// job, by the client the CLI uses.
func TestAuthorizedCalls(t *testing.T) {
	const token = "tok"
	job := &fakeJob{}
	c := Client{Addr: strings.TrimPrefix(serve(t, job, token), "http://"), Token: token}
	ctx := context.Background()
	st, err := c.Status(ctx)
	if err != nil || st.Job != "fake" || st.Version != Version {
		t.Fatalf("Status: %+v, %v", st, err)
	}
	if p, err := c.Savepoint(ctx); err != nil || p != "/cp/savepoints/sp-0000000007" {
		t.Fatalf("Savepoint: %q, %v", p, err)
	}
	if p, err := c.Stop(ctx, false); err != nil || p != "" {
		t.Fatalf("Stop: %q, %v", p, err)
	}
	if p, err := c.Stop(ctx, true); err != nil || p != "/cp/savepoints/sp-0000000008" {
		t.Fatalf("Stop with a savepoint: %q, %v", p, err)
	}
	if sp, stops, with := job.calls(); sp != 1 || stops != 1 || with != 1 {
		t.Fatalf("the job got %d savepoints, %d stops, %d stops with a savepoint; want 1 each", sp, stops, with)
	}
	job.fail = errors.New("checkpoint 9 declined by sink[0]")
	if _, err := c.Savepoint(ctx); err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "declined by sink[0]") {
		t.Fatalf("a failed savepoint: %v, want the 409 with the job's reason", err)
	}
	wrong := Client{Addr: c.Addr, Token: "other"}
	if _, err := wrong.Savepoint(ctx); err == nil || !strings.Contains(err.Error(), "403") {
		t.Fatalf("a wrong token: %v, want a 403", err)
	}
}

func TestListenRefusesNonLoopbackWithoutToken(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:0"} {
		_, err := Listen(addr, false)
		if err == nil || !strings.Contains(err.Error(), "not a loopback address and no token") || !strings.Contains(err.Error(), addr) {
			t.Errorf("Listen(%q) without a token: %v, want the refusal naming the address", addr, err)
		}
	}
	if _, err := Listen("127.0.0.1", false); err == nil || !strings.Contains(err.Error(), "not host:port") {
		t.Errorf("Listen without a port: %v", err)
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		ln, err := Listen(addr, false)
		if err != nil {
			t.Errorf("Listen(%q): %v", addr, err)
			continue
		}
		ln.Close()
	}
	ln, err := Listen("0.0.0.0:0", true)
	if err != nil {
		t.Fatalf("Listen on every interface with a token: %v", err)
	}
	ln.Close()
}

func TestLoadToken(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	empty := filepath.Join(dir, "empty")
	spaced := filepath.Join(dir, "spaced")
	for name, content := range map[string]string{good: "abc123\n", empty: " \n", spaced: "a b"} {
		if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("OPS_TEST_TOKEN", "from-env")
	t.Setenv("OPS_TEST_EMPTY", "")
	cases := []struct {
		file, env, want, err string
	}{
		{good, "", "abc123", ""},
		{"", "OPS_TEST_TOKEN", "from-env", ""},
		{"", "", "", ""},
		{empty, "", "", "is empty"},
		{spaced, "", "", "printable ASCII"},
		{filepath.Join(dir, "missing"), "", "", "readable file"},
		{"", "OPS_TEST_EMPTY", "", "unset or empty"},
		{"", "OPS_TEST_UNSET", "", "unset or empty"},
		{good, "OPS_TEST_TOKEN", "", "give one"},
	}
	for _, c := range cases {
		got, err := LoadToken(c.file, c.env)
		if c.err == "" && (err != nil || got != c.want) || c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("LoadToken(%q, %q) = %q, %v; want %q, error with %q", c.file, c.env, got, err, c.want, c.err)
		}
	}
}

// TestAddRates checks the rates and shares computed from two samples.
func TestAddRates(t *testing.T) {
	sample := func(in, out, busy, bp int64) Status {
		return Status{Operators: []Operator{{Name: "op", RecordsIn: in, RecordsOut: out,
			Subtasks: []Subtask{{Index: 0, Task: "op[0]", BusyMillis: busy, BackpressuredMillis: bp}}}}}
	}
	from, to := sample(100, 50, 0, 0), sample(300, 150, 1000, 500)
	got := addRates(sample(400, 200, 1200, 600), from, to, 2*time.Second)
	op := got.Operators[0]
	if op.InPerSecond != 100 || op.OutPerSecond != 50 || op.Subtasks[0].Busy != 0.5 || op.Subtasks[0].Backpressured != 0.25 {
		b, _ := json.Marshal(op)
		t.Fatalf("rates %s, want 100 in/s, 50 out/s, busy 0.5, backpressured 0.25", b)
	}
	// Shares never leave [0, 1], even when counters restart (a new process).
	got = addRates(sample(0, 0, 0, 0), to, from, time.Second)
	if s := got.Operators[0].Subtasks[0]; s.Busy != 0 || s.Backpressured != 0 {
		t.Fatalf("shares after a counter reset: %+v", s)
	}
}

// TestSamplerKeepsTheThroughputHistory: each sample after the first adds
// a point with every operator's rates over its interval; the history keeps
// the latest MaxThroughputPoints.
func TestSamplerKeepsTheThroughputHistory(t *testing.T) {
	s := &sampler{done: make(chan struct{})}
	status := func(n int64) Status {
		return Status{Operators: []Operator{{Name: "src", RecordsIn: n, RecordsOut: n, Subtasks: []Subtask{{Task: "src[0]"}}}}}
	}
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for i := range MaxThroughputPoints + 10 {
		s.take(status(int64(i)*100), t0.Add(time.Duration(i)*time.Second))
	}
	st := s.withRates(status(0))
	if len(st.Throughput) != MaxThroughputPoints {
		t.Fatalf("%d points, want the latest %d", len(st.Throughput), MaxThroughputPoints)
	}
	for _, p := range st.Throughput {
		if len(p.Operators) != 1 || p.Operators[0] != (OperatorRate{Name: "src", InPerSecond: 100, OutPerSecond: 100}) {
			t.Fatalf("a point %+v; want src at 100 records a second in and out", p)
		}
	}
	if last := st.Throughput[len(st.Throughput)-1].Time; !last.Equal(t0.Add((MaxThroughputPoints + 9) * time.Second)) {
		t.Fatalf("the newest point is at %v, want the last sample's time", last)
	}
}
