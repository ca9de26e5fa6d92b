package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Backend is what the swedev task needs of a sandbox: a Manager in the same process or a
// Client of a remote rlhost-sandbox.
type Backend interface {
	Create(ctx context.Context, req CreateRequest) (Info, error)
	Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error)
	ReadFile(ctx context.Context, id, path string, max int64) (string, error)
	WriteFile(ctx context.Context, id, path, content string) error
	ApplyPatch(ctx context.Context, id, patch string) (ExecResult, error)
	Diff(ctx context.Context, id string) (string, error)
	RunTests(ctx context.Context, id string, req TestRequest) (TestReport, error)
	Renew(ctx context.Context, id string) (Info, error)
	Delete(ctx context.Context, id string) error
}

var (
	_ Backend = (*Manager)(nil)
	_ Backend = (*Client)(nil)
)

// Client talks to an rlhost-sandbox server. Its errors wrap ErrNotFound, ErrBadInput and
// ErrFull as the server's status codes say.
type Client struct {
	URL   string // base URL, e.g. http://127.0.0.1:8790
	Token string
	HTTP  *http.Client
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("sandbox client: %v", err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.URL, "/")+path, rd)
	if err != nil {
		return fmt.Errorf("sandbox client: %v", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	res, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("sandbox client: the sandbox at %s is not reachable (is rlhost-sandbox running?): %v", c.URL, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 256<<20))
	if err != nil {
		return fmt.Errorf("sandbox client: reading the answer: %v", err)
	}
	if res.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := res.Status
		if json.Unmarshal(b, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		switch res.StatusCode {
		case http.StatusNotFound:
			return fmt.Errorf("%w (remote): %s", ErrNotFound, msg)
		case http.StatusBadRequest:
			return fmt.Errorf("%w (remote): %s", ErrBadInput, msg)
		case http.StatusTooManyRequests:
			return fmt.Errorf("%w (remote): %s", ErrFull, msg)
		}
		return fmt.Errorf("sandbox client: %s", msg)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("sandbox client: the answer is not the expected JSON: %v", err)
		}
	}
	return nil
}

func inst(id, rest string) string { return "/instances/" + url.PathEscape(id) + rest }

// Create makes an instance.
func (c *Client) Create(ctx context.Context, req CreateRequest) (Info, error) {
	var info Info
	return info, c.do(ctx, http.MethodPost, "/instances", req, &info)
}

// Exec runs a command.
func (c *Client) Exec(ctx context.Context, id string, req ExecRequest) (ExecResult, error) {
	var res ExecResult
	return res, c.do(ctx, http.MethodPost, inst(id, "/exec"), req, &res)
}

// ReadFile reads a file of the working tree (max is the server's).
func (c *Client) ReadFile(ctx context.Context, id, path string, _ int64) (string, error) {
	var res struct{ Content string }
	return res.Content, c.do(ctx, http.MethodGet, inst(id, "/file?path="+url.QueryEscape(path)), nil, &res)
}

// WriteFile writes a file of the working tree.
func (c *Client) WriteFile(ctx context.Context, id, path, content string) error {
	return c.do(ctx, http.MethodPut, inst(id, "/file?path="+url.QueryEscape(path)), map[string]string{"content": content}, nil)
}

// ApplyPatch applies a unified diff.
func (c *Client) ApplyPatch(ctx context.Context, id, patch string) (ExecResult, error) {
	var res ExecResult
	return res, c.do(ctx, http.MethodPost, inst(id, "/patch"), map[string]string{"patch": patch}, &res)
}

// Diff returns the changes against the base commit.
func (c *Client) Diff(ctx context.Context, id string) (string, error) {
	var res struct{ Diff string }
	return res.Diff, c.do(ctx, http.MethodGet, inst(id, "/diff"), nil, &res)
}

// RunTests runs tests.
func (c *Client) RunTests(ctx context.Context, id string, req TestRequest) (TestReport, error) {
	var rep TestReport
	return rep, c.do(ctx, http.MethodPost, inst(id, "/tests"), req, &rep)
}

// Renew extends the lease.
func (c *Client) Renew(ctx context.Context, id string) (Info, error) {
	var info Info
	return info, c.do(ctx, http.MethodPost, inst(id, "/renew"), nil, &info)
}

// Delete deletes the instance.
func (c *Client) Delete(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, inst(id, ""), nil, nil)
}

// Isolation asks the server for its isolation mode (GET /healthz).
func (c *Client) Isolation(ctx context.Context) (string, error) {
	var h struct {
		Isolation string `json:"isolation"`
	}
	err := c.do(ctx, "GET", "/healthz", nil, &h)
	return h.Isolation, err
}
