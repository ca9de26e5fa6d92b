// Package mlflowrest is the one client of an MLflow tracking server's REST API in the
// repository: host/metrics logs a run's metrics with it and plugins/mlflow (the MLflow trace
// backend) its traces. It knows requests, error answers and experiments; what to send, when
// to retry and how to report a failure stay with the callers. It imports only the standard
// library.
package mlflowrest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
)

// API is the path prefix of MLflow's tracking API (version 2.0); traces are under
// /api/3.0/mlflow/ and OTLP spans at /v1/traces.
const API = "/api/2.0/mlflow/"

// Client calls one tracking server.
type Client struct {
	Base   string       // the tracking URI, without a trailing slash
	HTTP   *http.Client // the requests' client (its Timeout bounds each one)
	Header http.Header  // sent with every request (authentication: AuthHeader)
}

// AuthHeader is the authentication MLflow's own clients send, from the environment variables
// they read: MLFLOW_TRACKING_TOKEN (a bearer token), else MLFLOW_TRACKING_USERNAME and
// MLFLOW_TRACKING_PASSWORD (basic). Empty when none is set.
func AuthHeader() http.Header {
	h := http.Header{}
	if tok := os.Getenv("MLFLOW_TRACKING_TOKEN"); tok != "" {
		h.Set("Authorization", "Bearer "+tok)
	} else if name := os.Getenv("MLFLOW_TRACKING_USERNAME"); name != "" {
		req := http.Request{Header: http.Header{}}
		req.SetBasicAuth(name, os.Getenv("MLFLOW_TRACKING_PASSWORD"))
		h.Set("Authorization", req.Header.Get("Authorization"))
	}
	return h
}

// Error is an error answer of the server.
type Error struct {
	Status  int
	Code    string // MLflow's error_code, e.g. RESOURCE_DOES_NOT_EXIST
	Message string
}

func (e *Error) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Message)
	}
	return fmt.Sprintf("HTTP %d: %s", e.Status, e.Message)
}

// Temporary tells whether the same request may succeed later (429 and 5xx).
func (e *Error) Temporary() bool {
	return e.Status == http.StatusTooManyRequests || e.Status >= 500
}

// ErrRequest is a request that could not be made (its body not encodable, its URL not
// valid): sending it again cannot help.
var ErrRequest = errors.New("bad request")

// ErrAnswer is a 2xx answer whose body is not the JSON expected.
var ErrAnswer = errors.New("bad answer")

// Do sends one request to path (under Base) with body (nil for none) of contentType and the
// extra headers, and decodes a 2xx answer's JSON into out (when out is not nil and the answer
// not empty). A non-2xx answer is an *Error; an answer that cannot be read, or a connection
// that fails, is returned as net/http gives it.
func (c *Client) Do(ctx context.Context, method, path string, body []byte, contentType string, headers map[string]string, out any) error {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.Base+path, r)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrRequest, err)
	}
	if c.Header != nil {
		req.Header = c.Header.Clone()
	}
	if body != nil {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		e := &Error{Status: resp.StatusCode}
		var ans struct {
			Code    string `json:"error_code"`
			Message string `json:"message"`
		}
		if json.Unmarshal(data, &ans) == nil && (ans.Code != "" || ans.Message != "") {
			e.Code, e.Message = ans.Code, ans.Message
		} else {
			e.Message = strings.TrimSpace(string(data[:min(len(data), 500)]))
		}
		return e
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("%w: %v", ErrAnswer, err)
		}
	}
	return nil
}

// Call is Do with in (nil for no body) sent as JSON.
func (c *Client) Call(ctx context.Context, method, path string, in, out any) error {
	var body []byte
	if in != nil {
		var err error
		if body, err = json.Marshal(in); err != nil {
			return fmt.Errorf("%w: %v", ErrRequest, err)
		}
	}
	return c.Do(ctx, method, path, body, "application/json", nil, out)
}

// Experiment is what EnsureExperiment finds.
type Experiment struct {
	ID             string `json:"experiment_id"`
	LifecycleStage string `json:"lifecycle_stage"` // "active" or "deleted"
}

// EnsureExperiment finds the experiment named name, creating it when missing (and finding it
// again when another client created it meanwhile). Each request goes through call, Call or a
// caller's wrapper of it (with retries, say).
func EnsureExperiment(name string, call func(method, path string, in, out any) error) (Experiment, error) {
	var got struct {
		Experiment Experiment `json:"experiment"`
	}
	get := func() error {
		return call(http.MethodGet, API+"experiments/get-by-name?experiment_name="+url.QueryEscape(name), nil, &got)
	}
	err := get()
	var e *Error
	if errors.As(err, &e) && e.Code == "RESOURCE_DOES_NOT_EXIST" {
		var created struct {
			ID string `json:"experiment_id"`
		}
		err = call(http.MethodPost, API+"experiments/create", map[string]any{"name": name}, &created)
		got.Experiment = Experiment{ID: created.ID}
		if errors.As(err, &e) && e.Code == "RESOURCE_ALREADY_EXISTS" { // created meanwhile
			err = get()
		}
	}
	return got.Experiment, err
}
