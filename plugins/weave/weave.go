package weave

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
	"sync"
	"time"

	"github.com/rlhost/rlhost/sdk/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Version is the plugin's version.
const Version = "0.1.0"

// Defaults of the official client.
const (
	DefaultMaxRequestBytes = 31 << 20
	defaultRetries         = 3
	defaultTimeout         = 30 * time.Second
	maxOpName              = 128
	rememberedCalls        = 200000 // ids of acknowledged calls kept to skip on a host retry
)

// Config is the plugin's config section (BackendConfig["weave"]).
type Config struct {
	BaseURL         string        `config:"base_url"`
	Entity          string        `config:"entity"`
	Project         string        `config:"project"`
	MaxRequestBytes int           `config:"max_request_bytes" want:"an integer of at least 1024"`
	Retries         int           `config:"retries" want:"a non-negative integer"`
	RetryBase       time.Duration `config:"retry_base_seconds" want:"a positive number"`
	Timeout         time.Duration `config:"timeout_seconds" want:"a positive number"`
}

func parseConfig(run trace.Run) (Config, error) {
	c := Config{Entity: os.Getenv("WANDB_ENTITY"), Project: run.Project, MaxRequestBytes: DefaultMaxRequestBytes,
		Retries: defaultRetries, RetryBase: 500 * time.Millisecond, Timeout: defaultTimeout}
	if err := trace.DecodeConfig("weave", run.Config, &c); err != nil {
		return c, err
	}
	bad := func(key, want string, v any) error {
		return fmt.Errorf("weave config key %q: want %s, got %v: %w", key, want, v, trace.ErrInvalidArgument)
	}
	switch {
	case c.MaxRequestBytes < 1024:
		return c, bad("max_request_bytes", "an integer of at least 1024", c.MaxRequestBytes)
	case c.Retries < 0:
		return c, bad("retries", "a non-negative integer", c.Retries)
	case c.RetryBase <= 0:
		return c, bad("retry_base_seconds", "a positive number", c.RetryBase.Seconds())
	case c.Timeout <= 0:
		return c, bad("timeout_seconds", "a positive number", c.Timeout.Seconds())
	}
	if c.BaseURL == "" {
		c.BaseURL = os.Getenv("WF_TRACE_SERVER_URL")
	}
	if c.BaseURL == "" {
		if b := os.Getenv("WANDB_BASE_URL"); b != "" {
			c.BaseURL = strings.TrimRight(b, "/") + "/traces"
		} else {
			c.BaseURL = "https://trace.wandb.ai"
		}
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if u, err := url.Parse(c.BaseURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("weave: base_url %q: want http(s)://host[:port][/path]: %w", c.BaseURL, trace.ErrInvalidArgument)
	}
	if c.Entity == "" || c.Project == "" || strings.Contains(c.Entity, "/") || strings.Contains(c.Project, "/") {
		return c, fmt.Errorf("weave: need an entity and a project without '/' (config entity or $WANDB_ENTITY, project or the run's project); have %q/%q: %w",
			c.Entity, c.Project, trace.ErrInvalidArgument)
	}
	return c, nil
}

// Backend is the Weave trace backend.
type Backend struct {
	mu       sync.Mutex
	cfg      Config
	key      string
	client   *http.Client
	complete bool // CALLS_COMPLETE_MODE_REQUIRED was answered: use /v2/.../calls/complete
	ready    bool
	sent     map[string]struct{} // acknowledged call ids (bounded)
	sentFIFO []string

	// Requests counts HTTP requests by path (for tests and logs).
	Requests map[string]int
}

// Info implements trace.Backend.
func (b *Backend) Info(context.Context) (trace.Info, error) {
	return trace.Info{Name: "weave", Version: Version, Features: []string{"call_upsert_batch", "calls_complete"}}, nil
}

// Init checks the config and the API key; it sends nothing.
func (b *Backend) Init(ctx context.Context, run trace.Run) (string, error) {
	cfg, err := parseConfig(run)
	if err != nil {
		return "", err
	}
	key := os.Getenv("WANDB_API_KEY")
	if key == "" {
		return "", fmt.Errorf("weave: WANDB_API_KEY is not set in the environment: %w", trace.ErrInvalidArgument)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfg, b.key, b.client, b.ready = cfg, key, &http.Client{Timeout: cfg.Timeout}, true
	if b.sent == nil {
		b.sent = map[string]struct{}{}
		b.Requests = map[string]int{}
	}
	return fmt.Sprintf("https://wandb.ai/%s/%s/weave/traces", url.PathEscape(cfg.Entity), url.PathEscape(cfg.Project)), nil
}

func (b *Backend) projectID() string { return b.cfg.Entity + "/" + b.cfg.Project }

// uuid formats 32 hex digits as a UUID.
func uuid(h string) string {
	if len(h) != 32 {
		return h
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// callID is a span's Weave call id: the trace's first 16 hex digits and the span id, as a UUID.
func callID(traceID, spanID string) string {
	if len(traceID) == 32 && len(spanID) == 16 {
		return uuid(traceID[:16] + spanID)
	}
	return traceID + ":" + spanID
}

func opName(name string) string {
	// Weave op names are plain names (or refs); ':' separates refs, so tool_call:x becomes tool_call.x.
	n := strings.ReplaceAll(name, ":", ".")
	if len(n) > maxOpName {
		n = n[:maxOpName]
	}
	return n
}

func jsonObject(s string) map[string]any {
	if s == "" {
		return map[string]any{}
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return map[string]any{"text": s}
	}
	if m, ok := v.(map[string]any); ok {
		return m
	}
	return map[string]any{"value": v}
}

func jsonValue(s string) any {
	if s == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return s
	}
	return v
}

func ts(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000000Z") }

// num is a span attribute's number (int64 or float64 off the wire, int set in process).
func num(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	}
	return 0, false
}

func summary(s trace.Span) map[string]any {
	if s.Name != "generate" {
		return map[string]any{}
	}
	p, r := s.Attributes["prompt_tokens"], s.Attributes["response_tokens"]
	pf, _ := num(p)
	rf, _ := num(r)
	return map[string]any{"usage": map[string]any{"rlhost-policy": map[string]any{
		"prompt_tokens": int64(pf), "completion_tokens": int64(rf), "total_tokens": int64(pf + rf), "requests": 1}}}
}

// item is one call: its start and end (legacy mode) or complete form, encoded.
type item struct {
	id    string
	parts []json.RawMessage
}

func (b *Backend) items(spans []trace.Span) []item {
	pid := b.projectID()
	out := make([]item, 0, len(spans))
	for _, s := range spans {
		id := callID(s.TraceID, s.SpanID)
		var parent any
		if s.ParentID != "" {
			parent = callID(s.TraceID, s.ParentID)
		}
		var exc any
		if s.Error != "" {
			exc = s.Error
		}
		attrs := map[string]any{}
		for k, v := range s.Attributes {
			attrs[k] = v
		}
		display := s.Name
		if s.ParentID == "" {
			display = fmt.Sprintf("step %v sample %v rollout %v", s.Attributes["step"], s.Attributes["sample_index"], s.Attributes["rollout_n"])
		}
		var parts []json.RawMessage
		if b.complete {
			c := map[string]any{"project_id": pid, "id": id, "trace_id": uuid(s.TraceID), "parent_id": parent, "op_name": opName(s.Name),
				"display_name": display, "started_at": ts(s.Start), "ended_at": ts(s.End), "attributes": attrs,
				"inputs": jsonObject(s.Inputs), "output": jsonValue(s.Outputs), "summary": summary(s), "exception": exc}
			raw, _ := json.Marshal(c)
			parts = append(parts, raw)
		} else {
			start := map[string]any{"mode": "start", "req": map[string]any{"start": map[string]any{"project_id": pid, "id": id,
				"trace_id": uuid(s.TraceID), "parent_id": parent, "op_name": opName(s.Name), "display_name": display,
				"started_at": ts(s.Start), "attributes": attrs, "inputs": jsonObject(s.Inputs)}}}
			end := map[string]any{"mode": "end", "req": map[string]any{"end": map[string]any{"project_id": pid, "id": id,
				"ended_at": ts(s.End), "output": jsonValue(s.Outputs), "summary": summary(s), "exception": exc}}}
			rs, _ := json.Marshal(start)
			re, _ := json.Marshal(end)
			parts = append(parts, rs, re)
		}
		out = append(out, item{id: id, parts: parts})
	}
	return out
}

func (b *Backend) body(items []item) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"batch":[`)
	first := true
	for _, it := range items {
		for _, p := range it.parts {
			if !first {
				buf.WriteByte(',')
			}
			first = false
			buf.Write(p)
		}
	}
	buf.WriteString("]}")
	return buf.Bytes()
}

func (b *Backend) path() string {
	if b.complete {
		return "/v2/" + url.PathEscape(b.cfg.Entity) + "/" + url.PathEscape(b.cfg.Project) + "/calls/complete"
	}
	return "/call/upsert_batch"
}

// errSplit: the server said 413; errComplete: the project needs calls_complete mode.
var (
	errSplit    = errors.New("weave: request too large (413)")
	errComplete = errors.New("weave: CALLS_COMPLETE_MODE_REQUIRED")
)

// post sends one request with retries on 5xx, 429 and network errors.
func (b *Backend) post(ctx context.Context, path string, body []byte) error {
	var last error
	for attempt := 0; attempt <= b.cfg.Retries; attempt++ {
		if attempt > 0 {
			select {
			case <-time.After(b.cfg.RetryBase << (attempt - 1)):
			case <-ctx.Done():
				return fmt.Errorf("weave: %s: %v (last error: %v): %w", path, ctx.Err(), last, trace.ErrUnavailable)
			}
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.cfg.BaseURL+path, bytes.NewReader(body))
		if err != nil {
			return fmt.Errorf("weave: %s: %v: %w", path, err, trace.ErrInvalidArgument)
		}
		req.Header.Set("Content-Type", "application/json")
		req.SetBasicAuth("api", b.key)
		b.Requests[path]++
		resp, err := b.client.Do(req)
		if err != nil {
			last = err
			continue
		}
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		switch {
		case resp.StatusCode/100 == 2:
			return nil
		case resp.StatusCode == http.StatusRequestEntityTooLarge:
			return errSplit
		case bytes.Contains(data, []byte("CALLS_COMPLETE_MODE_REQUIRED")):
			return errComplete
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			last = fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(data[:min(len(data), 300)]))
			continue
		default:
			return fmt.Errorf("weave: %s: HTTP %d: %s: %w", path, resp.StatusCode, bytes.TrimSpace(data[:min(len(data), 500)]), trace.ErrInvalidArgument)
		}
	}
	return fmt.Errorf("weave: %s: %d attempts failed, last: %v: %w", path, b.cfg.Retries+1, last, trace.ErrUnavailable)
}

// send posts items in requests under the size limit, splitting in half on 413.
func (b *Backend) send(ctx context.Context, items []item) error {
	if len(items) == 0 {
		return nil
	}
	body := b.body(items)
	if len(body) > b.cfg.MaxRequestBytes && len(items) > 1 {
		h := len(items) / 2
		if err := b.send(ctx, items[:h]); err != nil {
			return err
		}
		return b.send(ctx, items[h:])
	}
	err := b.post(ctx, b.path(), body)
	if errors.Is(err, errSplit) {
		if len(items) == 1 {
			return fmt.Errorf("weave: call %s alone is too large for the server (%d bytes): %w", items[0].id, len(body), trace.ErrInvalidArgument)
		}
		h := len(items) / 2
		if err := b.send(ctx, items[:h]); err != nil {
			return err
		}
		return b.send(ctx, items[h:])
	}
	if err != nil {
		return err
	}
	for _, it := range items {
		b.remember(it.id)
	}
	return nil
}

func (b *Backend) remember(id string) {
	if _, ok := b.sent[id]; ok {
		return
	}
	b.sent[id] = struct{}{}
	b.sentFIFO = append(b.sentFIFO, id)
	if len(b.sentFIFO) > rememberedCalls {
		delete(b.sent, b.sentFIFO[0])
		b.sentFIFO = b.sentFIFO[1:]
	}
}

// Export sends the spans as calls.
func (b *Backend) Export(ctx context.Context, spans []trace.Span) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.ready {
		return status.Error(codes.FailedPrecondition, "weave: Export before Init")
	}
	var todo []trace.Span
	for i, s := range spans {
		if s.TraceID == "" || s.SpanID == "" {
			return fmt.Errorf("weave: span %d (%q) has no trace or span id: %w", i, s.Name, trace.ErrInvalidArgument)
		}
		if _, done := b.sent[callID(s.TraceID, s.SpanID)]; !done {
			todo = append(todo, s)
		}
	}
	err := b.send(ctx, b.items(todo))
	if errors.Is(err, errComplete) && !b.complete {
		b.complete = true
		var left []trace.Span
		for _, s := range todo {
			if _, done := b.sent[callID(s.TraceID, s.SpanID)]; !done {
				left = append(left, s)
			}
		}
		err = b.send(ctx, b.items(left))
	}
	if errors.Is(err, errComplete) {
		return fmt.Errorf("weave: the server asks for calls_complete mode even on %s: %w", b.path(), trace.ErrInvalidArgument)
	}
	return err
}

// Flush: every Export is sent when it returns.
func (b *Backend) Flush(context.Context) error { return nil }

// Shutdown implements trace.Backend.
func (b *Backend) Shutdown(context.Context) error {
	b.mu.Lock()
	b.ready = false
	b.mu.Unlock()
	return nil
}

var _ trace.Backend = (*Backend)(nil)
