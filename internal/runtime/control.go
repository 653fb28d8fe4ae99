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
// control, docs/operations.md); see stream.ControlOptions, which it
// mirrors, for its documentation. The zero value serves nothing.
type ControlOptions struct {
	Addr      string                                    // host:port to serve on; empty serves nothing
	TokenFile string                                    // file holding the bearer token
	TokenEnv  string                                    // environment variable holding the token
	Metrics   func(job string, m *Metrics) http.Handler // the handler of GET /metrics; nil answers 404
}

// OpenControl validates o and opens its listener and token; nil, "" when
// o serves nothing. names spell the options in its errors. A job calls it
// at Start; package cluster for the control API of an instance.
func OpenControl(o ControlOptions, names OptionNames) (net.Listener, string, error) {
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
