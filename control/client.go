package control

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Client calls the control API of a running job.
type Client struct {
	// Addr is the job's control address: host:port or an http:// URL.
	Addr string
	// Token is the bearer token, needed by Savepoint and Stop.
	Token string
	// HTTP is the client used; nil: http.DefaultClient.
	HTTP *http.Client
}

// Status returns the job's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var st Status
	err := c.call(ctx, http.MethodGet, "/api/v1/job", &st)
	return st, err
}

// Savepoint takes a savepoint and returns its location.
func (c *Client) Savepoint(ctx context.Context) (string, error) {
	var r SavepointResponse
	err := c.call(ctx, http.MethodPost, "/api/v1/savepoint", &r)
	return r.Savepoint, err
}

// Stop stops the job; with savepoint, after taking one, whose location it
// returns.
func (c *Client) Stop(ctx context.Context, savepoint bool) (string, error) {
	path := "/api/v1/stop"
	if savepoint {
		path += "?savepoint=true"
	}
	var r SavepointResponse
	err := c.call(ctx, http.MethodPost, path, &r)
	return r.Savepoint, err
}

func (c *Client) call(ctx context.Context, method, path string, into any) error {
	base := c.Addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimSuffix(base, "/")+path, nil)
	if err != nil {
		return fmt.Errorf("control address %q: %w: use host:port, such as 127.0.0.1:8081", c.Addr, err)
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w (is the job running with its control API at %s?)", method, path, err, c.Addr)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		var e ErrorResponse
		if json.Unmarshal(body, &e) == nil && e.Error != "" {
			return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, e.Error)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if err := json.Unmarshal(body, into); err != nil {
		return fmt.Errorf("%s %s: the answer is not the API's JSON: %w", method, path, err)
	}
	return nil
}
