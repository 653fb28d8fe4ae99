package runtime

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/exactlyonce/exactly/control"
)

// ControlOptions configure the job's control API and web page (package
// control, docs/operations.md). The zero value serves nothing.
type ControlOptions struct {
	// Addr is the host:port to serve on; empty (the default) serves
	// nothing. It must be a loopback address, such as 127.0.0.1:8081,
	// unless a token is set: a non-loopback address without one is
	// refused at Start. Port 0 picks a free port; [Job.ControlAddr] tells
	// which.
	Addr string
	// TokenFile is a file holding the bearer token that the calls that
	// change the job (savepoint, stop) need; read once at Start. Without a
	// token (here or in TokenEnv) the API is read-only.
	TokenFile string
	// TokenEnv is the name of an environment variable holding the token,
	// instead of TokenFile.
	TokenEnv string
	// Metrics, when set, makes the handler of GET /metrics from the job's
	// name and metrics: pass metrics.Handler for Prometheus. Nil answers
	// 404, and the core packages link no Prometheus code.
	Metrics func(job string, m *Metrics) http.Handler
}

// openControl validates o and opens its listener and token; nil, "" when
// o serves nothing.
func openControl(o ControlOptions, names OptionNames) (net.Listener, string, error) {
	if o.Addr == "" {
		if o.TokenFile != "" || o.TokenEnv != "" || o.Metrics != nil {
			return nil, "", fmt.Errorf(`exactly: option Control.Addr = "" while other Control options are set: set Control.Addr to a host:port such as 127.0.0.1:8081, or leave Control empty`)
		}
		return nil, "", nil
	}
	token, err := control.LoadToken(o.TokenFile, o.TokenEnv)
	if err != nil {
		return nil, "", fmt.Errorf("exactly: %s: %w", names.ControlToken, err)
	}
	ln, err := control.Listen(o.Addr, token != "")
	if err != nil {
		return nil, "", fmt.Errorf("exactly: %s = %q is invalid: %w (a non-loopback address needs %s; choose another address with %s)", names.ControlAddr, o.Addr, err, names.ControlToken, names.ControlAddr)
	}
	return ln, token, nil
}

// serveControl serves the job's control API on ln.
func (j *Job) serveControl(ln net.Listener, token string) {
	cfg := control.Config{Token: token, TokenOption: j.opts.optionNames().ControlToken}
	if j.opts.Control.Metrics != nil {
		cfg.Metrics = j.opts.Control.Metrics(j.g.Job, &j.metrics)
	}
	j.control = control.Serve(ln, j, cfg)
	j.opts.Logger.Info("control API and web page serving", "job", j.g.Job, "url", "http://"+j.control.Addr()+"/", "token", token != "")
}

// closeControl stops the control server, letting the answers in flight
// (a stop's) be written.
func (j *Job) closeControl() {
	if j.control == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := j.control.Close(ctx); err != nil {
		j.opts.Logger.Warn("closing the control server failed", "job", j.g.Job, "error", err)
	}
}

// ControlAddr returns the address the control API listens on, "" when
// the job serves none.
func (j *Job) ControlAddr() string {
	if j.control == nil {
		return ""
	}
	return j.control.Addr()
}
