package mlflow

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rlhost/rlhost/internal/mlflowrest"
	"github.com/rlhost/rlhost/sdk/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Version is the plugin's version.
const Version = "0.1.0"

// Config is the plugin's config section (BackendConfig["mlflow"]).
type Config struct {
	TrackingURI    string        `config:"tracking_uri"`    // default $MLFLOW_TRACKING_URI, then http://127.0.0.1:5000
	ExperimentName string        `config:"experiment_name"` // default the run's project
	RunID          string        `config:"run_id"`          // attach to this run (the metrics logger's); default: create one
	Timeout        time.Duration `config:"timeout_seconds" want:"a positive number"`
}

func parseConfig(run trace.Run) (Config, error) {
	c := Config{TrackingURI: os.Getenv("MLFLOW_TRACKING_URI"), ExperimentName: run.Project, Timeout: 30 * time.Second}
	if err := trace.DecodeConfig("mlflow", run.Config, &c); err != nil {
		return c, err
	}
	if c.Timeout <= 0 {
		return c, fmt.Errorf("mlflow config key %q: want a positive number, got %v: %w", "timeout_seconds", c.Timeout.Seconds(), trace.ErrInvalidArgument)
	}
	if c.TrackingURI == "" {
		c.TrackingURI = "http://127.0.0.1:5000"
	}
	c.TrackingURI = strings.TrimRight(c.TrackingURI, "/")
	if u, err := url.Parse(c.TrackingURI); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return c, fmt.Errorf("mlflow: tracking_uri %q: want http(s)://host:port: %w", c.TrackingURI, trace.ErrInvalidArgument)
	}
	if c.ExperimentName == "" {
		c.ExperimentName = "rlhost"
	}
	return c, nil
}

// Backend is the MLflow trace backend.
type Backend struct {
	mu    sync.Mutex
	cfg   Config
	api   mlflowrest.Client
	expID string
	runID string
	ready bool
}

// Info implements trace.Backend.
func (b *Backend) Info(context.Context) (trace.Info, error) {
	return trace.Info{Name: "mlflow", Version: Version, Features: []string{"otlp", "start_trace_v3", "source_run"}}, nil
}

// call sends a JSON (or, with contentType, raw) request and decodes a JSON answer into out.
// Network errors, 5xx and 429 wrap trace.ErrUnavailable; other failures are invalid arguments.
func (b *Backend) call(ctx context.Context, method, path string, body []byte, contentType string, headers map[string]string, out any) error {
	return classify(path, b.api.Do(ctx, method, path, body, contentType, headers, out))
}

func (b *Backend) callJSON(ctx context.Context, method, path string, in, out any) error {
	return classify(path, b.api.Call(ctx, method, path, in, out))
}

// classify names the path in err and marks it as a trace error: a request that cannot be
// made and an error answer other than 429 and 5xx are invalid arguments, the rest (the
// network, 429, 5xx, an answer that cannot be read) unavailable.
func classify(path string, err error) error {
	var e *mlflowrest.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &e) && !e.Temporary(), errors.Is(err, mlflowrest.ErrRequest):
		return fmt.Errorf("mlflow: %s: %w: %w", path, err, trace.ErrInvalidArgument)
	}
	return fmt.Errorf("mlflow: %s: %w: %w", path, err, trace.ErrUnavailable)
}

// Init finds or creates the experiment and the run.
func (b *Backend) Init(ctx context.Context, run trace.Run) (string, error) {
	cfg, err := parseConfig(run)
	if err != nil {
		return "", err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cfg, b.ready = cfg, false
	// MLflow's own clients' authentication, from the host's environment (plugins inherit it):
	// MLFLOW_TRACKING_TOKEN, or MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD
	b.api = mlflowrest.Client{Base: cfg.TrackingURI, HTTP: &http.Client{Timeout: cfg.Timeout}, Header: mlflowrest.AuthHeader()}

	exp, err := mlflowrest.EnsureExperiment(cfg.ExperimentName, func(method, path string, in, out any) error {
		return b.callJSON(ctx, method, path, in, out)
	})
	if err != nil {
		return "", err
	}
	b.expID = exp.ID

	if cfg.RunID != "" {
		var r struct {
			Run struct {
				Info struct {
					ExperimentID string `json:"experiment_id"`
				} `json:"info"`
			} `json:"run"`
		}
		if err := b.callJSON(ctx, http.MethodGet, mlflowrest.API+"runs/get?run_id="+url.QueryEscape(cfg.RunID), nil, &r); err != nil {
			return "", err
		}
		if r.Run.Info.ExperimentID != "" && r.Run.Info.ExperimentID != b.expID {
			b.expID = r.Run.Info.ExperimentID // the run decides: traces go beside it
		}
		b.runID = cfg.RunID
	} else if b.runID == "" {
		name := run.RunName
		if name == "" {
			name = run.RunID
		}
		var r struct {
			Run struct {
				Info struct {
					RunID string `json:"run_id"`
				} `json:"info"`
			} `json:"run"`
		}
		req := map[string]any{"experiment_id": b.expID, "run_name": name, "start_time": time.Now().UnixMilli(),
			"tags": []map[string]string{{"key": "mlflow.runName", "value": name}, {"key": "rlhost.run_id", "value": run.RunID}}}
		if err := b.callJSON(ctx, http.MethodPost, mlflowrest.API+"runs/create", req, &r); err != nil {
			return "", err
		}
		b.runID = r.Run.Info.RunID
	}
	b.ready = true
	return fmt.Sprintf("%s/#/experiments/%s/runs/%s", cfg.TrackingURI, b.expID, b.runID), nil
}

// RunID returns the MLflow run the traces are linked to ("" before Init).
func (b *Backend) RunID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.runID
}

// ExperimentID returns the MLflow experiment of the traces.
func (b *Backend) ExperimentID() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.expID
}

// Export sends the spans over OTLP, then the trace info of every finished trajectory.
func (b *Backend) Export(ctx context.Context, spans []trace.Span) error {
	b.mu.Lock()
	ready, expID, runID := b.ready, b.expID, b.runID
	b.mu.Unlock()
	if !ready {
		return status.Error(codes.FailedPrecondition, "mlflow: Export before Init")
	}
	for i, s := range spans {
		if s.TraceID == "" || s.SpanID == "" {
			return fmt.Errorf("mlflow: span %d (%q) has no trace or span id: %w", i, s.Name, trace.ErrInvalidArgument)
		}
	}
	if err := b.call(ctx, http.MethodPost, "/v1/traces", encodeOTLP(spans, "rlhost"), "application/x-protobuf",
		map[string]string{"x-mlflow-experiment-id": expID}, nil); err != nil {
		return err
	}
	for _, s := range spans {
		if s.ParentID != "" {
			continue
		}
		if err := b.callJSON(ctx, http.MethodPost, "/api/3.0/mlflow/traces", traceInfo(s, expID, runID), nil); err != nil {
			return err
		}
	}
	return nil
}

// traceInfo is the StartTraceV3 body for a trajectory's root span.
func traceInfo(s trace.Span, expID, runID string) map[string]any {
	state := "OK"
	if s.Error != "" {
		state = "ERROR"
	}
	tags := traceTags(s)
	tags["mlflow.traceName"] = s.Name
	meta := map[string]string{"mlflow.trace_schema.version": "3", "mlflow.sourceRun": runID}
	return map[string]any{"trace": map[string]any{"trace_info": map[string]any{
		"trace_id":           TraceID(s.TraceID),
		"client_request_id":  s.TraceID,
		"trace_location":     map[string]any{"type": "MLFLOW_EXPERIMENT", "mlflow_experiment": map[string]any{"experiment_id": expID}},
		"request_time":       s.Start.UTC().Format(time.RFC3339Nano),
		"execution_duration": fmt.Sprintf("%.9fs", s.End.Sub(s.Start).Seconds()),
		"state":              state,
		"request_preview":    truncate(s.Inputs, 1000),
		"response_preview":   truncate(s.Outputs, 1000),
		"trace_metadata":     meta,
		"tags":               sortedMap(tags),
	}}}
}

func sortedMap(m map[string]string) map[string]string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, len(m))
	for _, k := range keys {
		out[k] = m[k]
	}
	return out
}

// Flush: every Export is written when it returns.
func (b *Backend) Flush(context.Context) error { return nil }

// Shutdown ends nothing on the server: the run belongs to the training run (and the metrics
// logger marks it finished).
func (b *Backend) Shutdown(context.Context) error {
	b.mu.Lock()
	b.ready = false
	b.mu.Unlock()
	return nil
}

var _ trace.Backend = (*Backend)(nil)
