package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/user"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlhost/rlhost/internal/mlflowrest"
)

// MLflowConfig says where and how to record a run in MLflow.
type MLflowConfig struct {
	TrackingURI string            // http(s)://host:port of the tracking server; "" uses $MLFLOW_TRACKING_URI
	Experiment  string            // experiment name, created if missing; "" means "Default"
	RunName     string            // shown in the UI; "" lets the server pick one
	Params      map[string]string // the flattened, redacted config; secret-looking entries are dropped too
	Tags        map[string]string // run tags; secret-looking entries are dropped

	// Tuning; zero values take the defaults in brackets.
	QueueSize      int           // metric points held while the server is slow or down [100000]
	RetryFor       time.Duration // how long one batch is retried before its points are dropped [5m]
	MaxBackoff     time.Duration // the longest pause between retries [5s]
	CloseTimeout   time.Duration // how long Close waits for queued points to be delivered [30s]
	RequestTimeout time.Duration // one HTTP request [30s]
	HTTPClient     *http.Client  // [a client with RequestTimeout]
}

// MLflow limits (mlflow/utils/validation.py).
const (
	mlflowBatchMetrics = 1000 // metrics per runs/log-batch
	mlflowBatchParams  = 100  // params per runs/log-batch
	mlflowKeyLen       = 250
	mlflowParamLen     = 6000
)

// MLflow logs a run to an MLflow tracking server over its REST API (see [NewMLflow]).
type MLflow struct {
	cfg   MLflowConfig
	api   mlflowrest.Client
	expID string
	runID string

	mu       sync.Mutex
	queue    []mlflowMetric
	closing  bool
	closed   bool
	deadline time.Time // set by Close: retries stop here
	failed   error
	dropped  int64
	sent     int64
	lastErr  error
	wake     chan struct{}
	done     chan struct{}
	stopWait chan struct{} // closed by Close to cut a backoff pause short
}

type mlflowMetric struct {
	Key       string    `json:"key"`
	Value     jsonValue `json:"value"`
	Timestamp int64     `json:"timestamp"`
	Step      int64     `json:"step"`
}

type mlflowKV struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// NewMLflow finds the experiment by name (creating it if missing), creates a run with the
// tags, logs the params, and starts the background sender. ctx bounds these setup calls.
//
// Log only queues the step's points (never blocking on the network); a goroutine sends
// them with runs/log-batch, at most 1000 per call, retrying with exponential backoff on
// connection errors, 429 and 5xx for up to RetryFor. Points that do not fit the queue, or
// whose batch the server rejects or that run out of retries, are counted ([MLflow.Dropped]).
// Close waits up to CloseTimeout for the queue to drain and ends the run FINISHED
// (FAILED after [Fail]); it reports the points that were not delivered.
//
// Metric and param names are made valid for MLflow the way veRL does it ("@" becomes
// "_at_", so val-core/openai/gsm8k/reward/mean@1 is logged as
// val-core/openai/gsm8k/reward/mean_at_1); other characters MLflow refuses become "_".
func NewMLflow(ctx context.Context, cfg MLflowConfig) (Logger, error) {
	if cfg.TrackingURI == "" {
		cfg.TrackingURI = os.Getenv("MLFLOW_TRACKING_URI")
	}
	u, err := url.Parse(cfg.TrackingURI)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("metrics: mlflow: tracking URI %q: want http(s)://host:port of an MLflow server", cfg.TrackingURI)
	}
	if cfg.Experiment == "" {
		cfg.Experiment = "Default"
	}
	setDefault(&cfg.QueueSize, 100000)
	setDefault(&cfg.RetryFor, 5*time.Minute)
	setDefault(&cfg.MaxBackoff, 5*time.Second)
	setDefault(&cfg.CloseTimeout, 30*time.Second)
	setDefault(&cfg.RequestTimeout, 30*time.Second)
	m := &MLflow{
		cfg: cfg,
		// The authentication of MLflow's own clients, from their environment variables.
		api:      mlflowrest.Client{Base: strings.TrimRight(cfg.TrackingURI, "/"), HTTP: cfg.HTTPClient, Header: mlflowrest.AuthHeader()},
		wake:     make(chan struct{}, 1),
		done:     make(chan struct{}),
		stopWait: make(chan struct{}),
	}
	if m.api.HTTP == nil {
		m.api.HTTP = &http.Client{Timeout: cfg.RequestTimeout}
	}
	if err := m.setup(ctx); err != nil {
		return nil, err
	}
	go m.run()
	return m, nil
}

func setDefault[T int | time.Duration](p *T, v T) {
	if *p <= 0 {
		*p = v
	}
}

// RunID is the MLflow run id, for linking traces to the run.
func (m *MLflow) RunID() string { return m.runID }

// ExperimentID is the id of the run's experiment.
func (m *MLflow) ExperimentID() string { return m.expID }

// Dropped is the number of metric points that were not (and will not be) delivered.
func (m *MLflow) Dropped() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dropped
}

// Sent is the number of metric points the server accepted.
func (m *MLflow) Sent() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sent
}

func (m *MLflow) setup(ctx context.Context) error {
	// Setup calls are retried like metric batches (a server that just started can be slow
	// to answer its first requests), within ctx.
	call := func(method, path string, in, out any) error {
		return m.retry(ctx, func() error { return m.api.Call(ctx, method, path, in, out) })
	}
	exp, err := mlflowrest.EnsureExperiment(m.cfg.Experiment, call)
	if err != nil {
		return fmt.Errorf("metrics: mlflow: experiment %q: %w", m.cfg.Experiment, err)
	}
	if exp.LifecycleStage == "deleted" {
		return fmt.Errorf("metrics: mlflow: experiment %q is deleted; restore it (mlflow experiments restore) or choose another name", m.cfg.Experiment)
	}
	m.expID = exp.ID

	tags, _ := DropSecrets(m.cfg.Tags)
	if _, ok := tags["mlflow.source.name"]; !ok {
		tags["mlflow.source.name"] = "rlhost"
	}
	if _, ok := tags["mlflow.user"]; !ok {
		if u, err := user.Current(); err == nil {
			tags["mlflow.user"] = u.Username
		}
	}
	req := map[string]any{
		"experiment_id": m.expID,
		"start_time":    time.Now().UnixMilli(),
		"tags":          sortedKVs(tags, mlflowParamLen),
	}
	if m.cfg.RunName != "" {
		req["run_name"] = m.cfg.RunName
	}
	var run struct {
		Run struct {
			Info struct {
				RunID string `json:"run_id"`
			} `json:"info"`
		} `json:"run"`
	}
	if err := call(http.MethodPost, mlflowrest.API+"runs/create", req, &run); err != nil {
		return fmt.Errorf("metrics: mlflow: create run in experiment %q: %w", m.cfg.Experiment, err)
	}
	m.runID = run.Run.Info.RunID

	params, _ := DropSecrets(m.cfg.Params)
	kvs := sortedKVs(params, mlflowParamLen)
	for len(kvs) > 0 {
		n := min(len(kvs), mlflowBatchParams)
		body := map[string]any{"run_id": m.runID, "params": kvs[:n]}
		if err := call(http.MethodPost, mlflowrest.API+"runs/log-batch", body, nil); err != nil {
			return fmt.Errorf("metrics: mlflow: run %s: log params: %w", m.runID, err)
		}
		kvs = kvs[n:]
	}
	return nil
}

// sortedKVs turns m into MLflow key/value pairs with valid keys and values cut to max
// characters.
func sortedKVs(m map[string]string, max int) []mlflowKV {
	kvs := make([]mlflowKV, 0, len(m))
	for k, v := range m {
		if len(v) > max {
			v = truncateUTF8(v, max-3) + "..."
		}
		kvs = append(kvs, mlflowKV{Key: MLflowKey(k), Value: v})
	}
	slices.SortFunc(kvs, func(a, b mlflowKV) int { return strings.Compare(a.Key, b.Key) })
	return kvs
}

func truncateUTF8(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

// MLflowKey makes a metric or param name valid for MLflow: "@" becomes "_at_" (as veRL
// does), characters outside letters, digits and "_-. :/" become "_", empty, "." and ".."
// path segments are removed or replaced, and the name is cut to 250 bytes.
func MLflowKey(key string) string {
	key = strings.ReplaceAll(key, "@", "_at_")
	var b strings.Builder
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', strings.ContainsRune("_-. :/", r):
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	var segs []string
	for _, s := range strings.Split(b.String(), "/") {
		switch s {
		case "":
			continue
		case ".", "..":
			s = strings.Repeat("_", len(s))
		}
		segs = append(segs, s)
	}
	out := strings.Join(segs, "/")
	if out == "" {
		out = "_"
	}
	if len(out) > mlflowKeyLen {
		out = strings.TrimRight(out[:mlflowKeyLen], "/")
	}
	return out
}

// Log queues the points of the step and returns at once. Points that do not fit the
// queue are counted as dropped.
func (m *MLflow) Log(s Step) error {
	ts := s.Time
	if ts.IsZero() {
		ts = time.Now()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closing {
		return fmt.Errorf("metrics: mlflow: run %s: log after close", m.runID)
	}
	for _, k := range s.Keys() {
		if len(m.queue) >= m.cfg.QueueSize {
			m.dropped++
			m.lastErr = fmt.Errorf("queue full (%d points)", m.cfg.QueueSize)
			continue
		}
		m.queue = append(m.queue, mlflowMetric{Key: MLflowKey(k), Value: jsonValue(s.Values[k]), Timestamp: ts.UnixMilli(), Step: int64(s.Step)})
	}
	select {
	case m.wake <- struct{}{}:
	default:
	}
	return nil
}

// Fail makes Close end the run FAILED.
func (m *MLflow) Fail(cause error) {
	m.mu.Lock()
	m.failed = cause
	m.mu.Unlock()
}

// Close delivers what is queued (waiting at most CloseTimeout), then ends the run. It
// returns an error when points were dropped or the run could not be ended.
func (m *MLflow) Close() error {
	m.mu.Lock()
	if m.closing {
		m.mu.Unlock()
		return nil
	}
	m.closing = true
	m.deadline = time.Now().Add(m.cfg.CloseTimeout)
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default:
	}
	select {
	case <-m.done:
	case <-time.After(m.cfg.CloseTimeout):
		close(m.stopWait)
		<-m.done // sendBatch cancels the request in flight and drops the rest
	}

	m.mu.Lock()
	m.dropped += int64(len(m.queue))
	m.queue = nil
	status := "FINISHED"
	if m.failed != nil {
		status = "FAILED"
	}
	dropped, sent, lastErr := m.dropped, m.sent, m.lastErr
	m.mu.Unlock()

	// Ending the run gets its own short budget, with retries, even after a slow drain.
	ctx, cancel := context.WithTimeout(context.Background(), max(m.cfg.RequestTimeout, 10*time.Second))
	defer cancel()
	body := map[string]any{"run_id": m.runID, "status": status, "end_time": time.Now().UnixMilli()}
	var errs []error
	if err := m.retry(ctx, func() error { return m.api.Call(ctx, http.MethodPost, mlflowrest.API+"runs/update", body, nil) }); err != nil {
		errs = append(errs, fmt.Errorf("metrics: mlflow: run %s: set status %s: %w", m.runID, status, err))
	}
	if dropped > 0 {
		errs = append(errs, fmt.Errorf("metrics: mlflow: run %s: %d of %d metric points were not delivered (last error: %v)",
			m.runID, dropped, dropped+sent, lastErr))
	}
	return errors.Join(errs...)
}

// run is the sender: it takes batches of at most 1000 points off the queue and sends
// them until Close.
func (m *MLflow) run() {
	defer close(m.done)
	for {
		m.mu.Lock()
		n := min(len(m.queue), mlflowBatchMetrics)
		batch := slices.Clone(m.queue[:n])
		closing := m.closing
		m.mu.Unlock()
		if n == 0 {
			if closing {
				return
			}
			<-m.wake
			continue
		}
		err := m.sendBatch(batch)
		m.mu.Lock()
		m.queue = m.queue[n:]
		if len(m.queue) == 0 {
			m.queue = nil // let the backing array go
		}
		if err != nil {
			m.dropped += int64(n)
			m.lastErr = err
		} else {
			m.sent += int64(n)
		}
		m.mu.Unlock()
	}
}

func (m *MLflow) sendBatch(batch []mlflowMetric) error {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.RetryFor)
	defer cancel()
	go func() { // Close out of time: abandon the request in flight too
		select {
		case <-m.stopWait:
			cancel()
		case <-ctx.Done():
		}
	}()
	body := map[string]any{"run_id": m.runID, "metrics": batch}
	return m.retry(ctx, func() error {
		m.mu.Lock()
		deadline := m.deadline
		m.mu.Unlock()
		if !deadline.IsZero() && time.Now().After(deadline) {
			return errStop
		}
		return m.api.Call(ctx, http.MethodPost, mlflowrest.API+"runs/log-batch", body, nil)
	})
}

var errStop = errors.New("close timeout reached")

// retry calls f until it succeeds, fails for good (a 4xx other than 429), ctx ends, or
// Close runs out of time, pausing 200ms, 400ms, ... up to MaxBackoff between attempts.
func (m *MLflow) retry(ctx context.Context, f func() error) error {
	pause := 200 * time.Millisecond
	for {
		err := f()
		if err == nil || !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up retrying: %w", err)
		case <-m.stopWait:
			return fmt.Errorf("close timeout reached: %w", err)
		case <-time.After(pause):
		}
		pause = min(2*pause, m.cfg.MaxBackoff)
	}
}

func retryable(err error) bool {
	if errors.Is(err, errStop) {
		return false
	}
	var apiErr *mlflowrest.Error
	if errors.As(err, &apiErr) {
		return apiErr.Temporary()
	}
	return true // connection refused, reset, timeout: the server may come back
}
