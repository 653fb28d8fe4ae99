package torture

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// toxiproxy controls a toxiproxy server through its HTTP API
// (github.com/Shopify/toxiproxy, run by scripts/toxiproxy.sh).
//
// A toxic is never removed: toxiproxy's DELETE of a toxic can hang for
// good while connections through the proxy close (Shopify/toxiproxy
// issues 210, 412 and 558, still open for v2.5.0; CI saw it on the
// latency of a clean stop during an outage). A fault heals by reset
// instead, which recreates the proxy without toxics.
type toxiproxy struct {
	api string // host:port of the API
	hc  http.Client

	mu      sync.Mutex
	proxies map[string][2]string // name → listen, upstream: what reset recreates
	faulty  map[string]bool      // the proxies given a toxic or disabled since their last reset
}

func newToxiproxy(api string) *toxiproxy {
	// A connection per call: a kept-alive connection that the server
	// closes while idle fails the next POST with "http: server closed idle
	// connection", which the client does not retry (POST is not
	// idempotent). CI saw it on a clean stop during an outage, 1m47s after
	// the previous call.
	return &toxiproxy{api: api, proxies: map[string][2]string{}, faulty: map[string]bool{}, hc: http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
}

// call sends a request with body (JSON-encoded when not nil) and fails
// unless the status is one of ok.
func (t *toxiproxy) call(ctx context.Context, method, path string, body any, ok ...int) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+t.api+path, rd)
	if err != nil {
		return err
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		return fmt.Errorf("toxiproxy %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(resp.Body)
	for _, s := range ok {
		if resp.StatusCode == s {
			return nil
		}
	}
	return fmt.Errorf("toxiproxy %s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(msg))
}

// proxy (re)creates the proxy name from listen to upstream, enabled and
// without toxics.
func (t *toxiproxy) proxy(ctx context.Context, name, listen, upstream string) error {
	t.mu.Lock()
	t.proxies[name] = [2]string{listen, upstream}
	t.mu.Unlock()
	return t.reset(ctx, name, true)
}

// reset deletes the proxy name, closing every connection through it, and
// creates it again as proxy made it, without toxics, enabled or not (a
// disabled proxy refuses connections). Deleting a proxy does not remove
// its toxics one by one, so it cannot hang as removing a toxic can.
func (t *toxiproxy) reset(ctx context.Context, name string, enabled bool) error {
	t.mu.Lock()
	p, ok := t.proxies[name]
	t.faulty[name] = true // until recreated enabled
	t.mu.Unlock()
	if !ok {
		return fmt.Errorf("toxiproxy: reset of the proxy %q, which this run did not create", name)
	}
	if err := t.call(ctx, http.MethodDelete, "/proxies/"+name, nil, http.StatusNoContent, http.StatusNotFound); err != nil {
		return err
	}
	if err := t.call(ctx, http.MethodPost, "/proxies", map[string]any{"name": name, "listen": p[0], "upstream": p[1], "enabled": enabled}, http.StatusCreated); err != nil {
		return err
	}
	t.mu.Lock()
	t.faulty[name] = !enabled
	t.mu.Unlock()
	return nil
}

// heal resets every proxy left with a toxic or disabled (a fault whose
// own reset failed), and leaves the others and their connections alone.
func (t *toxiproxy) heal(ctx context.Context) error {
	t.mu.Lock()
	var faulty []string
	for name, f := range t.faulty {
		if f {
			faulty = append(faulty, name)
		}
	}
	t.mu.Unlock()
	var errs []error
	for _, name := range faulty {
		errs = append(errs, t.reset(ctx, name, true))
	}
	return errors.Join(errs...)
}

// remove deletes the proxy name, closing its connections.
func (t *toxiproxy) remove(ctx context.Context, name string) error {
	t.mu.Lock()
	delete(t.proxies, name)
	delete(t.faulty, name)
	t.mu.Unlock()
	return t.call(ctx, http.MethodDelete, "/proxies/"+name, nil, http.StatusNoContent, http.StatusNotFound)
}

// toxic adds a toxic of kind typ named tname to the proxy, on stream
// ("upstream" or "downstream").
func (t *toxiproxy) toxic(ctx context.Context, proxy, tname, typ, stream string, attrs map[string]any) error {
	t.setFaulty(proxy)
	return t.call(ctx, http.MethodPost, "/proxies/"+proxy+"/toxics",
		map[string]any{"name": tname, "type": typ, "stream": stream, "toxicity": 1.0, "attributes": attrs}, http.StatusOK)
}

// setFaulty marks the proxy name for heal.
func (t *toxiproxy) setFaulty(name string) {
	t.mu.Lock()
	t.faulty[name] = true
	t.mu.Unlock()
}
