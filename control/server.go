package control

import (
	"cmp"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"time"
)

// Job is what the server operates: a running job (the engine's Job
// implements it).
type Job interface {
	// Status returns the job's status now, without rates.
	Status() Status
	// Savepoint takes a savepoint and returns where it is.
	Savepoint(ctx context.Context) (string, error)
	// StopWithSavepoint takes a savepoint, commits its output, stops the
	// job and returns where the savepoint is.
	StopWithSavepoint(ctx context.Context) (string, error)
	// Stop stops the job, committing what its last completed checkpoint
	// covers; it returns at once.
	Stop()
}

// Config configures a Server.
type Config struct {
	// Token is the bearer token the calls that change the job need; ""
	// refuses them all (403).
	Token string
	// TokenOption names the option that gives the job its token, for the
	// refusal of a job without one. Default
	// "stream.Options.Control.TokenFile or TokenEnv".
	TokenOption string
	// Metrics, when set, serves GET /metrics (package metrics builds a
	// Prometheus handler); nil answers 404.
	Metrics http.Handler
	// SampleInterval is how often the server samples the counters to
	// compute rates and shares of time. Default 1s.
	SampleInterval time.Duration
}

// Server serves the control API and the web page of one job.
type Server struct {
	job     Job
	cfg     Config
	http    *http.Server
	addr    string
	sampler *sampler
}

// Serve serves the API of job on ln until Close.
func Serve(ln net.Listener, job Job, cfg Config) *Server {
	if cfg.SampleInterval <= 0 {
		cfg.SampleInterval = time.Second
	}
	s := &Server{job: job, cfg: cfg, addr: ln.Addr().String(), sampler: newSampler(job.Status, cfg.SampleInterval)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/job", s.get(func(st Status) any { return st }))
	// Each part of the status at its own path, as {"version": 1, "<part>": ...}.
	parts := map[string]func(Status) any{
		"graph":         func(st Status) any { return st.Graph },
		"operators":     func(st Status) any { return st.Operators },
		"checkpoints":   func(st Status) any { return st.Checkpoints },
		"restarts":      func(st Status) any { return st.Restarts },
		"lag":           func(st Status) any { return st.Lag },
		"throughput":    func(st Status) any { return st.Throughput },
		"configuration": func(st Status) any { return st.Configuration },
		"cluster":       func(st Status) any { return st.Cluster },
	}
	for name, part := range parts {
		mux.HandleFunc("GET /api/v1/"+name, s.get(func(st Status) any { return map[string]any{"version": Version, name: part(st)} }))
	}
	mux.HandleFunc("POST /api/v1/savepoint", s.savepoint)
	mux.HandleFunc("POST /api/v1/stop", s.stop)
	mux.HandleFunc("GET /metrics", s.metrics)
	page := pageHandler()
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /web/", page)
	s.http = &http.Server{Handler: secured(mux), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.http.Serve(ln) }()
	return s
}

// Addr returns the address the server listens on.
func (s *Server) Addr() string { return s.addr }

// Close stops the server, letting the requests in flight (a stop with a
// savepoint's answer) end until ctx does.
func (s *Server) Close(ctx context.Context) error {
	s.sampler.stop()
	err := s.http.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return s.http.Close()
	}
	return err
}

// secured sets the headers of every response: nothing is cached, framed
// or sniffed, and the page runs only its own scripts.
func secured(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'")
		h.ServeHTTP(w, r)
	})
}

// get answers with part of the job's status, with rates.
func (s *Server) get(part func(Status) any) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, part(s.sampler.withRates(s.job.Status())))
	}
}

// SavepointResponse answers POST /api/v1/savepoint and POST /api/v1/stop.
type SavepointResponse struct {
	Version int `json:"version"`
	// Savepoint is the savepoint's location; empty for a stop without one.
	Savepoint string `json:"savepoint,omitempty"`
	// Stopping says the job was told to stop.
	Stopping bool `json:"stopping"`
}

// ErrorResponse is the body of every answer that is not 2xx.
type ErrorResponse struct {
	Version int    `json:"version"`
	Error   string `json:"error"`
}

func (s *Server) savepoint(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	path, err := s.job.Savepoint(r.Context())
	if err != nil {
		writeError(w, http.StatusConflict, "savepoint failed: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, SavepointResponse{Version: Version, Savepoint: path})
}

func (s *Server) stop(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r) {
		return
	}
	switch sp := r.URL.Query().Get("savepoint"); sp {
	case "", "false":
		s.job.Stop()
		writeJSON(w, http.StatusAccepted, SavepointResponse{Version: Version, Stopping: true})
	case "true":
		path, err := s.job.StopWithSavepoint(r.Context())
		if err != nil {
			writeError(w, http.StatusConflict, "stop with a savepoint failed (the job runs on): "+err.Error())
			return
		}
		writeJSON(w, http.StatusOK, SavepointResponse{Version: Version, Savepoint: path, Stopping: true})
	default:
		writeError(w, http.StatusBadRequest, "savepoint="+sp+" is invalid: use savepoint=true or leave it out")
	}
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Metrics == nil {
		writeError(w, http.StatusNotFound, "no Prometheus metrics on this job: set Control.Metrics to metrics.Handler in its options")
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}

// authorized checks the bearer token of a call that changes the job, and
// answers the refusal itself: 401 without credentials, 403 with wrong ones
// or when the job has no token.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	h := r.Header.Get("Authorization")
	if h == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="exactly"`)
		writeError(w, http.StatusUnauthorized, "this call changes the job: send its token as 'Authorization: Bearer TOKEN' (exactly ... --token-file FILE)")
		return false
	}
	if s.cfg.Token == "" {
		writeError(w, http.StatusForbidden, "this job has no control token, so nothing may change it through the API: start it with "+cmp.Or(s.cfg.TokenOption, "stream.Options.Control.TokenFile or TokenEnv")+" set")
		return false
	}
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(s.cfg.Token)) != 1 {
		writeError(w, http.StatusForbidden, "the token is not this job's: send the token it was started with ("+cmp.Or(s.cfg.TokenOption, "stream.Options.Control.TokenFile or TokenEnv")+")")
		return false
	}
	return true
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, ErrorResponse{Version: Version, Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
