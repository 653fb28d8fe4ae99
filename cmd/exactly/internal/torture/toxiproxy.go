package torture

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
	api     string // host:port of the API
	hc      http.Client
	proxies map[string][2]string // name → listen, upstream: what reset recreates
}

func newToxiproxy(api string) *toxiproxy {
	// A connection per call: a kept-alive connection that the server
	// closes while idle fails the next POST with "http: server closed idle
	// connection", which the client does not retry (POST is not
	// idempotent). CI saw it on a clean stop during an outage, 1m47s after
	// the previous call.
	return &toxiproxy{api: api, proxies: map[string][2]string{}, hc: http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
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
	t.proxies[name] = [2]string{listen, upstream}
	return t.reset(ctx, name, true)
}

// reset deletes the proxy name, closing every connection through it, and
// creates it again as proxy made it, without toxics, enabled or not (a
// disabled proxy refuses connections). Deleting a proxy does not remove
// its toxics one by one, so it cannot hang as removing a toxic can.
func (t *toxiproxy) reset(ctx context.Context, name string, enabled bool) error {
	p, ok := t.proxies[name]
	if !ok {
		return fmt.Errorf("toxiproxy: reset of the proxy %q, which this run did not create", name)
	}
	if err := t.call(ctx, http.MethodDelete, "/proxies/"+name, nil, http.StatusNoContent, http.StatusNotFound); err != nil {
		return err
	}
	return t.call(ctx, http.MethodPost, "/proxies", map[string]any{"name": name, "listen": p[0], "upstream": p[1], "enabled": enabled}, http.StatusCreated)
}

// remove deletes the proxy name, closing its connections.
func (t *toxiproxy) remove(ctx context.Context, name string) error {
	delete(t.proxies, name)
	return t.call(ctx, http.MethodDelete, "/proxies/"+name, nil, http.StatusNoContent, http.StatusNotFound)
}

// enable enables or disables the proxy name: disabling closes every
// connection through it and refuses new ones.
func (t *toxiproxy) enable(ctx context.Context, name string, on bool) error {
	return t.call(ctx, http.MethodPost, "/proxies/"+name, map[string]any{"enabled": on}, http.StatusOK)
}

// toxic adds a toxic of kind typ named tname to the proxy, on stream
// ("upstream" or "downstream").
func (t *toxiproxy) toxic(ctx context.Context, proxy, tname, typ, stream string, attrs map[string]any) error {
	return t.call(ctx, http.MethodPost, "/proxies/"+proxy+"/toxics",
		map[string]any{"name": tname, "type": typ, "stream": stream, "toxicity": 1.0, "attributes": attrs}, http.StatusOK)
}
