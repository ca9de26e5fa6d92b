package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/rlhost/rlhost/internal/mlflowrest"
	"github.com/rlhost/rlhost/internal/mlflowrest/mlflowtest"
)

// These tests run against a real MLflow tracking server (pip package mlflow), started once
// per test binary on first use and stopped by TestMain. The binary is found through
// $RLHOST_MLFLOW, then ~/.cache/rlhost/mlflow-venv/bin/mlflow (where `make setup-mlflow`
// installs it), then $PATH. Without it the tests skip, or fail when $CI is set.

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.srv != nil {
		shared.srv.Stop()
	}
	os.Exit(code)
}

var shared struct {
	once sync.Once
	srv  *mlflowServer
	err  error
}

// mlflowServer is the shared server, with the reads the tests check the stored run with.
type mlflowServer struct{ *mlflowtest.Server }

// realMLflow returns the shared server, starting it on first use.
func realMLflow(t testing.TB) *mlflowServer {
	t.Helper()
	bin := mlflowtest.Binary()
	if bin == "" {
		msg := "mlflow is not installed: `make setup-mlflow` installs it (or set RLHOST_MLFLOW to the mlflow executable)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	shared.once.Do(func() {
		dir, err := os.MkdirTemp("", "rlhost-mlflow-test-")
		if err != nil {
			shared.err = err
			return
		}
		s, err := mlflowtest.Launch(bin, dir)
		if s != nil {
			shared.srv = &mlflowServer{s}
		}
		shared.err = err
	})
	if shared.err != nil {
		t.Fatalf("starting the MLflow server: %v", shared.err)
	}
	return shared.srv
}

// get calls a read endpoint of the server's REST API.
func (s *mlflowServer) get(t *testing.T, path string, q url.Values, out any) {
	t.Helper()
	resp, err := http.Get(s.URI + "/api/2.0/mlflow/" + path + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, b)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, b)
	}
}

type storedRun struct {
	Run struct {
		Info struct {
			RunID, Status, RunName, ExperimentID string
		} `json:"info"`
		Data struct {
			Metrics []mlflowMetric `json:"metrics"`
			Params  []mlflowKV     `json:"params"`
			Tags    []mlflowKV     `json:"tags"`
		} `json:"data"`
	} `json:"run"`
}

func (r *storedRun) UnmarshalJSON(b []byte) error {
	// MLflow writes run_id, run_name and experiment_id in snake case.
	type plain storedRun
	var aux struct {
		Run struct {
			Info struct {
				RunID        string `json:"run_id"`
				Status       string `json:"status"`
				RunName      string `json:"run_name"`
				ExperimentID string `json:"experiment_id"`
			} `json:"info"`
		} `json:"run"`
	}
	if err := json.Unmarshal(b, &aux); err != nil {
		return err
	}
	if err := json.Unmarshal(b, (*plain)(r)); err != nil {
		return err
	}
	i := aux.Run.Info
	r.Run.Info.RunID, r.Run.Info.Status, r.Run.Info.RunName, r.Run.Info.ExperimentID = i.RunID, i.Status, i.RunName, i.ExperimentID
	return nil
}

func (s *mlflowServer) run(t *testing.T, id string) *storedRun {
	t.Helper()
	var r storedRun
	s.get(t, "runs/get", url.Values{"run_id": {id}}, &r)
	return &r
}

func (s *mlflowServer) history(t *testing.T, runID, key string) []mlflowMetric {
	t.Helper()
	var h struct {
		Metrics []mlflowMetric `json:"metrics"`
	}
	s.get(t, "metrics/get-history", url.Values{"run_id": {runID}, "metric_key": {key}, "max_results": {"10000"}}, &h)
	return h.Metrics
}

func TestMLflowServerRoundTrip(t *testing.T) {
	srv := realMLflow(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exp := "rlhost-test-" + t.Name()
	cfg := MLflowConfig{
		TrackingURI: srv.URI, Experiment: exp, RunName: "gsm8k-grpo",
		Params: map[string]string{
			"data.train_batch_size":                "8",
			"actor_rollout_ref.rollout.n":          "4",
			"algorithm.adv_estimator":              "grpo",
			"trainer.logger":                       "['console','mlflow']",
			"trainer.mlflow.api_key":               "do-not-store",
			"actor_rollout_ref.rollout.multi_turn": "{enable: true}",
		},
		Tags: map[string]string{"task": "gsm8k"},
	}
	l, err := NewMLflow(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	runID := RunID(l)
	t0 := time.Now().Truncate(time.Millisecond)
	for step := 1; step <= 5; step++ {
		v := map[string]float64{
			ScoreMean:                    0.1 * float64(step),
			PGLoss:                       -0.5 + 0.01*float64(step),
			ResponseLengthMean:           200 - float64(step),
			ValRewardKey("openai/gsm8k"): 0.2 + 0.05*float64(step),
		}
		if step == 3 {
			v[GradNorm] = math.NaN()
		}
		if step == 5 { // more than one log-batch worth of points in one step
			for i := 0; i < 1200; i++ {
				v[fmt.Sprintf("bulk/m%04d", i)] = float64(i)
			}
		}
		if err := l.Log(Step{Step: step, Time: t0.Add(time.Duration(step) * time.Second), Values: v}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if m := l.(*MLflow); m.Sent() != 5*4+1+1200 || m.Dropped() != 0 {
		t.Errorf("sent %d, dropped %d", m.Sent(), m.Dropped())
	}

	r := srv.run(t, runID)
	info := r.Run.Info
	if info.Status != "FINISHED" || info.RunName != "gsm8k-grpo" || info.ExperimentID != l.(*MLflow).ExperimentID() {
		t.Errorf("run info %+v", info)
	}
	params := map[string]string{}
	for _, p := range r.Run.Data.Params {
		params[p.Key] = p.Value
	}
	for k, v := range cfg.Params {
		if k == "trainer.mlflow.api_key" {
			if _, ok := params[k]; ok {
				t.Errorf("secret param %q stored", k)
			}
			continue
		}
		if params[k] != v {
			t.Errorf("param %q = %q, want %q", k, params[k], v)
		}
	}
	tags := map[string]string{}
	for _, p := range r.Run.Data.Tags {
		tags[p.Key] = p.Value
	}
	if tags["task"] != "gsm8k" || tags["mlflow.source.name"] != "rlhost" {
		t.Errorf("tags %v", tags)
	}
	latest := map[string]float64{}
	for _, m := range r.Run.Data.Metrics {
		latest[m.Key] = float64(m.Value)
	}
	if len(latest) != 4+1+1200 || latest[ScoreMean] != 0.5 || latest["val-core/openai/gsm8k/reward/mean_at_1"] != 0.45 || latest["bulk/m1199"] != 1199 {
		t.Errorf("%d latest metrics; score %v, val %v", len(latest), latest[ScoreMean], latest["val-core/openai/gsm8k/reward/mean_at_1"])
	}

	h := srv.history(t, runID, ScoreMean)
	if len(h) != 5 {
		t.Fatalf("history of %s: %+v", ScoreMean, h)
	}
	seen := map[int64]bool{}
	for _, p := range h {
		if want := 0.1 * float64(p.Step); float64(p.Value) != want || p.Timestamp != t0.Add(time.Duration(p.Step)*time.Second).UnixMilli() {
			t.Errorf("history point %+v, want value %v at the step's time", p, want)
		}
		seen[p.Step] = true
	}
	if len(seen) != 5 {
		t.Errorf("steps %v", seen)
	}
	// A retried batch whose first attempt was stored after all: MLflow keeps one copy.
	if err := l.(*MLflow).api.Call(ctx, http.MethodPost, mlflowrest.API+"runs/log-batch", map[string]any{"run_id": runID, "metrics": h[:2]}, nil); err != nil {
		t.Fatal(err)
	}
	if again := srv.history(t, runID, ScoreMean); len(again) != 5 {
		t.Errorf("after re-sending 2 stored points the history has %d points, want 5", len(again))
	}
	if g := srv.history(t, runID, GradNorm); len(g) != 1 || !math.IsNaN(float64(g[0].Value)) || g[0].Step != 3 {
		t.Errorf("NaN metric history %+v", g)
	}

	// A second run in the same experiment reuses it, and a failed run ends FAILED.
	l2, err := NewMLflow(ctx, MLflowConfig{TrackingURI: srv.URI, Experiment: exp})
	if err != nil {
		t.Fatal(err)
	}
	if l2.(*MLflow).ExperimentID() != info.ExperimentID {
		t.Errorf("experiment %s, then %s", info.ExperimentID, l2.(*MLflow).ExperimentID())
	}
	l2.Log(Step{Step: 1, Values: map[string]float64{ScoreMean: 1}})
	Fail(l2, errors.New("out of memory"))
	if err := l2.Close(); err != nil {
		t.Fatal(err)
	}
	if st := srv.run(t, RunID(l2)).Run.Info.Status; st != "FAILED" {
		t.Errorf("failed run has status %s", st)
	}
}

// TestMLflowServerRestart stops the server in the middle of a run and starts it again:
// Log never blocks meanwhile, and the points logged while it was down arrive after it is
// back (none dropped).
func TestMLflowServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts the MLflow server (about a minute)")
	}
	srv := realMLflow(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := NewMLflow(ctx, MLflowConfig{TrackingURI: srv.URI, Experiment: "rlhost-test-restart",
		MaxBackoff: time.Second, CloseTimeout: 2 * time.Minute, RequestTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := l.(*MLflow)
	logStep := func(step int) {
		start := time.Now()
		if err := l.Log(Step{Step: step, Values: map[string]float64{ScoreMean: float64(step), PGLoss: -float64(step)}}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d > 50*time.Millisecond {
			t.Errorf("Log of step %d took %v", step, d)
		}
	}
	for step := 1; step <= 3; step++ {
		logStep(step)
	}
	for deadline := time.Now().Add(30 * time.Second); m.Sent() < 6 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
	}
	if m.Sent() != 6 {
		t.Fatalf("before the stop: %d points sent, want 6", m.Sent())
	}

	srv.Stop()
	for step := 4; step <= 8; step++ { // while the server is down
		logStep(step)
		time.Sleep(200 * time.Millisecond)
	}
	if m.Sent() != 6 {
		t.Errorf("%d points sent while the server was down", m.Sent())
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	logStep(9)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if m.Sent() != 18 || m.Dropped() != 0 {
		t.Errorf("sent %d dropped %d, want 18 and 0", m.Sent(), m.Dropped())
	}
	h := srv.history(t, m.RunID(), ScoreMean)
	steps := map[int64]bool{}
	for _, p := range h {
		steps[p.Step] = true
	}
	if len(steps) != 9 || len(h) != 9 {
		t.Errorf("history has %d points at steps %v, want one at each of 1..9", len(h), steps)
	}
	if st := srv.run(t, m.RunID()).Run.Info.Status; st != "FINISHED" {
		t.Errorf("status %s", st)
	}
}
