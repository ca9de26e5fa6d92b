// Package pythonmath_test drives the Python task plugins of this directory through the host's
// plugin runtime (host/plugin), as training does: the guarantees Go plugins have (errors that
// name the plugin and the call, deadlines, restart after a crash) hold for Python plugins too.
// The plugins run in the virtualenv that `make setup-python` makes (or RLHOST_PYTHON).
package pythonmath_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hostplugin "github.com/rlhost/rlhost/host/plugin"
	"github.com/rlhost/rlhost/host/reward"
	"github.com/rlhost/rlhost/sdk/conformance"
	"github.com/rlhost/rlhost/sdk/task"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// needPython skips (or, under CI, fails) when the SDK's virtualenv is missing.
func needPython(tb testing.TB) {
	tb.Helper()
	py := os.Getenv("RLHOST_PYTHON")
	if py == "" {
		home, _ := os.UserHomeDir()
		py = filepath.Join(home, ".cache", "rlhost", "python-venv", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("no Python with the rlhost SDK at %s: run make setup-python", py)
		}
		tb.Skipf("no Python with the rlhost SDK at %s: run make setup-python", py)
	}
}

func binary(tb testing.TB, path, name string) hostplugin.Binary {
	tb.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		tb.Fatal(err)
	}
	return hostplugin.Binary{Kind: "task", Name: name, Path: abs}
}

type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func openFault(t *testing.T) (*hostplugin.Task, *syncBuf) {
	needPython(t)
	var logs syncBuf
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Debug})
	tk, err := hostplugin.OpenTaskBinary(context.Background(), binary(t, "testdata/fault/rlhost-task-pyfault", "pyfault"), nil,
		hostplugin.Options{Logger: logger, StartTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tk.Close)
	return tk, &logs
}

// The SDK's plugins pass the conformance kit as real processes: gRPC's own TLS with the host's
// P-256 certificates (no relay), the handshake line's certificate, hclog JSON on stderr.
func TestConformance(t *testing.T) {
	needPython(t)
	conformance.RunBinary(t, "rlhost-task-python-math", conformance.Options{StartTimeout: 30 * time.Second})
}

func score(ctx context.Context, tk *hostplugin.Task, solution string) error {
	res, err := tk.Score(ctx, []task.ScoreItem{{DataSource: "fault", Solution: solution, GroundTruth: "1"}})
	if err == nil && (len(res) != 1 || res[0].Score != 1) {
		return fmt.Errorf("Score(%q) = %+v; want one result scoring 1", solution, res)
	}
	return err
}

func TestHandlerExceptionReachesHost(t *testing.T) {
	tk, logs := openFault(t)
	ctx := context.Background()
	err := score(ctx, tk, "raise")
	if err == nil {
		t.Fatal("Score of a raising handler succeeded")
	}
	if status.Code(errors.Unwrap(err)) != codes.Internal {
		t.Errorf("code %v; want Internal (%v)", status.Code(errors.Unwrap(err)), err)
	}
	for _, want := range []string{"plugin rlhost-task-pyfault: Score of 1 item:", "python task 'pyfault'", "ZeroDivisionError: division by zero on purpose"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	// The traceback went to the plugin's log, which the host shows under the plugin's name, and
	// what the handler printed is a log line too. The plugin's stderr is read by its own
	// goroutine, so the lines may land just after the error: wait for them (bounded).
	hasLogs := func(l string) bool {
		return strings.Contains(l, "rlhost-task-pyfault") && strings.Contains(l, "Traceback") && strings.Contains(l, "scoring 1 items")
	}
	for deadline := time.Now().Add(10 * time.Second); !hasLogs(logs.String()) && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if l := logs.String(); !strings.Contains(l, "rlhost-task-pyfault") || !strings.Contains(l, "Traceback") {
		t.Errorf("host log lacks the plugin's traceback:\n%s", l)
	}
	if l := logs.String(); !strings.Contains(l, "scoring 1 items") {
		t.Errorf("host log lacks the line the handler printed:\n%s", l)
	}
	// The plugin lives on.
	if err := score(ctx, tk, "ok"); err != nil {
		t.Fatal(err)
	}
	if n := tk.Supervisor().Starts(); n != 1 {
		t.Errorf("starts = %d; want 1 (a raising handler is not a crash)", n)
	}
}

func TestHandlerThatNeverAnswersTimesOut(t *testing.T) {
	tk, _ := openFault(t)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := score(ctx, tk, "hang")
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the call returned after %s; want about the 500ms deadline", took)
	}
	if err == nil || status.Code(errors.Unwrap(err)) != codes.DeadlineExceeded {
		t.Fatalf("Score of a hanging handler: %v; want DeadlineExceeded", err)
	}
	if !strings.Contains(err.Error(), "plugin rlhost-task-pyfault: Score of 1 item:") {
		t.Errorf("error %q does not name the plugin and the call", err)
	}
	// Other calls are still served.
	if err := score(context.Background(), tk, "ok"); err != nil {
		t.Fatal(err)
	}
}

func TestPluginThatDiesIsRestarted(t *testing.T) {
	tk, _ := openFault(t)
	ctx := context.Background()
	err := score(ctx, tk, "die")
	var perr *hostplugin.Error
	if !errors.As(err, &perr) || !perr.Exited || perr.Call != "Score" {
		t.Fatalf("Score on a dying plugin: %v; want an *Error with Exited and Call Score", err)
	}
	for _, want := range []string{"plugin rlhost-task-pyfault exited during Score", "about to die on purpose"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if err := score(ctx, tk, "ok"); err != nil {
		t.Fatalf("Score after the crash: %v", err)
	}
	if n := tk.Supervisor().Starts(); n != 2 {
		t.Errorf("starts = %d; want 2", n)
	}
}

// TestPythonMathComponents checks the example's reward components through the host.
func TestPythonMathComponents(t *testing.T) {
	needPython(t)
	ctx := context.Background()
	tk, err := hostplugin.OpenTaskBinary(ctx, binary(t, "rlhost-task-python-math", "python-math"), nil, hostplugin.Options{StartTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	res, err := tk.Score(ctx, []task.ScoreItem{
		{DataSource: "python-math", Solution: "<think>48/2 = 24</think><answer>72</answer>", GroundTruth: "72"},
		{DataSource: "python-math", Solution: "<answer>71</answer>", GroundTruth: "72"},
		{DataSource: "python-math", Solution: "It is 72.", GroundTruth: "72"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]float64{{"accuracy": 1, "format": 1}, {"accuracy": 0, "format": 0.4}, {"accuracy": 1, "format": 0}}
	for i, r := range res {
		got, _ := json.Marshal(r.Components)
		exp, _ := json.Marshal(want[i])
		if string(got) != string(exp) || r.Err != "" {
			t.Errorf("item %d: components %s (err %q); want %s", i, got, r.Err, exp)
		}
	}
}

// TestWeightedComponents scores through the host's reward manager, as the trainer does, with
// reward_model.reward_weights {accuracy: 1, format: 0.5}: the reward is the weighted sum of the
// components the Python plugin returns, and every component is kept for the metrics.
func TestWeightedComponents(t *testing.T) {
	needPython(t)
	ctx := context.Background()
	tk, err := hostplugin.OpenTaskBinary(ctx, binary(t, "rlhost-task-python-math", "python-math"), nil, hostplugin.Options{StartTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	items := []reward.Item{
		{ScoreItem: task.ScoreItem{DataSource: "python-math", Solution: "<think>48/2 = 24</think><answer>72</answer>", GroundTruth: "72"}},
		{ScoreItem: task.ScoreItem{DataSource: "python-math", Solution: "<answer>71</answer>", GroundTruth: "72"}},
		{ScoreItem: task.ScoreItem{DataSource: "python-math", Solution: "It is 72.", GroundTruth: "72"}},
	}
	tests := []struct {
		name    string
		weights map[string]float64
		want    []float64
	}{
		{"task's own score", nil, []float64{1.1, 0.04, 1}},
		{"accuracy 1, format 0.5", map[string]float64{"accuracy": 1, "format": 0.5}, []float64{1.5, 0.2, 1}},
		{"format alone", map[string]float64{"format": 1}, []float64{1, 0.4, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := reward.New(reward.Config{Kind: reward.Batch, Weights: tt.weights})
			if err != nil {
				t.Fatal(err)
			}
			res, _, err := m.Score(ctx, tk, items)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if d := r.Score - tt.want[i]; d > 1e-9 || d < -1e-9 || r.Err != "" {
					t.Errorf("item %d: score %v (err %q); want %v", i, r.Score, r.Err, tt.want[i])
				}
				if _, ok := r.Components["accuracy"]; !ok || len(r.Components) != 2 {
					t.Errorf("item %d: components %v; want accuracy and format", i, r.Components)
				}
			}
		})
	}
}

// ---- benchmarks: round trips of the Python plugins beside the Go gsm8k plugin ----

func reportLatency(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
	b.ReportMetric(q(0.50), "p50-us")
	b.ReportMetric(q(0.99), "p99-us")
}

func open(b *testing.B, path, name string) *hostplugin.Task {
	if _, err := os.Stat(path); err != nil {
		b.Skipf("%s: %v (run make build)", path, err)
	}
	tk, err := hostplugin.OpenTaskBinary(context.Background(), binary(b, path, name), nil, hostplugin.Options{StartTimeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(tk.Close)
	return tk
}

const goGSM8K = "../../bin/plugins/rlhost-task-gsm8k"

func benchObs(b *testing.B, tk *hostplugin.Task, tool string) {
	ctx := context.Background()
	info, err := tk.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	var row task.Row
	if info.Samples[0].Row != nil {
		row = *info.Samples[0].Row
	} else if row, err = tk.Preprocess(ctx, task.Record{Split: "train", Data: info.Samples[0].Record}); err != nil {
		b.Fatal(err)
	}
	st, err := tk.Start(ctx, task.StartRequest{Row: row})
	if err != nil {
		b.Fatal(err)
	}
	req := task.ObsRequest{InstanceID: st.InstanceID, Kind: task.ObsTools, Turn: 1, Assistant: task.Message{Role: "assistant",
		ToolCalls: []task.ToolCall{{ID: "c", Name: tool, Arguments: json.RawMessage(`{"answer":"72"}`)}}}}
	if _, err := tk.Obs(ctx, req); err != nil { // warm-up: lazy imports, connection
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := time.Now()
		res, err := tk.Obs(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.ToolResults) != 1 || res.ToolResults[0].Error {
			b.Fatalf("Obs: %+v", res)
		}
		lat = append(lat, time.Since(s))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

func benchScore(b *testing.B, tk *hostplugin.Task, n int) {
	ctx := context.Background()
	items := make([]task.ScoreItem, n)
	for i := range items {
		items[i] = task.ScoreItem{DataSource: "openai/gsm8k", Solution: fmt.Sprintf("step by step ... #### %d", i%100), GroundTruth: "72"}
	}
	if _, err := tk.Score(ctx, items[:1]); err != nil { // warm-up: lazy imports, connection
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := time.Now()
		if _, err := tk.Score(ctx, items); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(s))
	}
	b.StopTimer()
	reportLatency(b, lat)
}

func BenchmarkObsGoGSM8K(b *testing.B) { benchObs(b, open(b, goGSM8K, "gsm8k"), "calc_gsm8k_reward") }
func BenchmarkObsPythonMath(b *testing.B) {
	needPython(b)
	benchObs(b, open(b, "rlhost-task-python-math", "python-math"), "check_answer")
}

// The fault fixture's tool and Score do no work: the protocol's cost alone.
func BenchmarkObsPythonTrivial(b *testing.B) {
	needPython(b)
	benchObs(b, open(b, "testdata/fault/rlhost-task-pyfault", "pyfault"), "check_answer")
}
func BenchmarkScore1GoGSM8K(b *testing.B) { benchScore(b, open(b, goGSM8K, "gsm8k"), 1) }
func BenchmarkScore1PythonMath(b *testing.B) {
	needPython(b)
	benchScore(b, open(b, "rlhost-task-python-math", "python-math"), 1)
}
func BenchmarkScore1PythonTrivial(b *testing.B) {
	needPython(b)
	benchScore(b, open(b, "testdata/fault/rlhost-task-pyfault", "pyfault"), 1)
}
func BenchmarkScore256GoGSM8K(b *testing.B) { benchScore(b, open(b, goGSM8K, "gsm8k"), 256) }
func BenchmarkScore256PythonMath(b *testing.B) {
	needPython(b)
	benchScore(b, open(b, "rlhost-task-python-math", "python-math"), 256)
}
func BenchmarkScore256PythonTrivial(b *testing.B) {
	needPython(b)
	benchScore(b, open(b, "testdata/fault/rlhost-task-pyfault", "pyfault"), 256)
}
