package tracing_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlhost/rlhost/host/tracing"
	"github.com/rlhost/rlhost/host/tracing/tracingtest"
	"github.com/rlhost/rlhost/sdk/trace"
)

func openMem(backends map[string]*tracingtest.Memory) func(context.Context, string) (trace.Backend, error) {
	return func(_ context.Context, name string) (trace.Backend, error) {
		if b, ok := backends[name]; ok {
			return b, nil
		}
		return nil, fmt.Errorf("no backend %q", name)
	}
}

func newTracer(t *testing.T, cfg tracing.Config, mems map[string]*tracingtest.Memory) *tracing.Tracer {
	t.Helper()
	if cfg.RunDir == "" {
		cfg.RunDir = t.TempDir()
	}
	tr, err := tracing.New(context.Background(), cfg, openMem(mems))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func closeTracer(t *testing.T, tr *tracing.Tracer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestChoose(t *testing.T) {
	batch := []int64{}
	for s := int64(0); s < 16; s++ {
		for k := 0; k < 4; k++ {
			batch = append(batch, 100+s)
		}
	}
	tests := []struct {
		name string
		max  int
		want int // chosen samples; 0 = nil (all)
	}{
		{"all", 0, 0},
		{"more than the batch", 20, 0},
		{"as many as the batch", 16, 0},
		{"one", 1, 1},
		{"five", 5, 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tracing.Choose(7, 3, false, batch, tt.max)
			if tt.want == 0 {
				if got != nil {
					t.Fatalf("Choose = %v; want nil (every sample)", got)
				}
				return
			}
			if len(got) != tt.want {
				t.Fatalf("chose %d samples %v; want %d", len(got), got, tt.want)
			}
			for s := range got {
				if s < 100 || s >= 116 {
					t.Errorf("chose %d, not in the batch", s)
				}
			}
		})
	}
	// Seeded: same seed and step -> same choice, whatever the order of the batch.
	rev := append([]int64(nil), batch...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	a, b := tracing.Choose(7, 3, false, batch, 4), tracing.Choose(7, 3, false, rev, 4)
	if fmt.Sprint(a) != fmt.Sprint(b) {
		t.Errorf("same seed and step, different choice: %v %v", a, b)
	}
	// Different steps, seeds or validate change the choice (with overwhelming probability
	// over 16 choose 4 = 1820 sets; these particular values are checked to differ).
	diff := 0
	for step := 0; step < 10; step++ {
		if fmt.Sprint(tracing.Choose(7, step, false, batch, 4)) != fmt.Sprint(tracing.Choose(7, step+1, false, batch, 4)) {
			diff++
		}
	}
	if diff < 8 {
		t.Errorf("consecutive steps chose the same samples %d times out of 10", 10-diff)
	}
	if fmt.Sprint(tracing.Choose(7, 3, false, batch, 4)) == fmt.Sprint(tracing.Choose(8, 3, false, batch, 4)) &&
		fmt.Sprint(tracing.Choose(7, 3, false, batch, 4)) == fmt.Sprint(tracing.Choose(9, 3, false, batch, 4)) {
		t.Errorf("the seed does not change the choice")
	}
}

// TestSamplingPicksWholeGroups: with max_samples_per_step = 3 and n = 4, each step traces 12
// trajectories: all 4 rollouts of 3 samples.
func TestSamplingPicksWholeGroups(t *testing.T) {
	mem := &tracingtest.Memory{}
	tr := newTracer(t, tracing.Config{MaxSamplesPerStep: 3, Seed: 1, Experiment: "e"}, map[string]*tracingtest.Memory{"local": mem})
	traced := tracingtest.Drive(tr, tracingtest.DriveOptions{Steps: 3, Batch: 8, N: 4})
	closeTracer(t, tr)
	if traced != 3*3*4 {
		t.Fatalf("traced %d trajectories; want %d", traced, 3*3*4)
	}
	groups := map[string]int{} // step/sample -> rollouts
	for _, s := range mem.Snapshot() {
		if s.ParentID == "" {
			groups[fmt.Sprint(s.Attributes["step"], "/", s.Attributes["sample_index"])]++
		}
	}
	if len(groups) != 9 {
		t.Fatalf("groups %v; want 3 per step", groups)
	}
	for g, n := range groups {
		if n != 4 {
			t.Errorf("group %s has %d rollouts traced; want all 4", g, n)
		}
	}
}

// TestTrajectorySpans checks the shape of a traced trajectory: the root and its attributes,
// the children, parents, token counts, decoded text and the multi-turn prompt delta.
func TestTrajectorySpans(t *testing.T) {
	mem := &tracingtest.Memory{}
	tr := newTracer(t, tracing.Config{Token2Text: true, Decode: tracingtest.Decode, Experiment: "exp-1"},
		map[string]*tracingtest.Memory{"local": mem})
	tracingtest.Drive(tr, tracingtest.DriveOptions{Steps: 1, Batch: 1, N: 1, FirstStep: 5, PromptTokens: 10, ResponseTokens: 6})
	closeTracer(t, tr)
	spans := mem.Snapshot()
	var names []string
	var root trace.Span
	for _, s := range spans {
		names = append(names, s.Name)
		if s.ParentID == "" {
			root = s
		}
	}
	if got, want := strings.Join(names, ","), "generate,tool_parse,tool_call:calc_gsm8k_reward,generate,agent_loop"; got != want {
		t.Fatalf("spans %s; want %s", got, want)
	}
	for k, v := range map[string]any{"step": int64(5), "sample_index": int64(1000), "rollout_n": int64(0), "validate": false,
		"experiment_name": "exp-1", "agent_name": "tool_agent", "task": "gsm8k", "data_source": "openai/gsm8k", "turns": int64(2)} {
		if root.Attributes[k] != v {
			t.Errorf("root attribute %s = %#v; want %#v", k, root.Attributes[k], v)
		}
	}
	if _, ok := root.Attributes["reward"].(float64); !ok {
		t.Errorf("root has no float reward: %#v", root.Attributes["reward"])
	}
	for _, s := range spans {
		if s.TraceID != root.TraceID || len(s.TraceID) != 32 || len(s.SpanID) != 16 {
			t.Errorf("span %s: ids %q/%q", s.Name, s.TraceID, s.SpanID)
		}
		if s.ParentID != "" && s.ParentID != root.SpanID {
			t.Errorf("span %s: parent %s; want the root %s", s.Name, s.ParentID, root.SpanID)
		}
		if s.Attributes["step"] != int64(5) || s.Attributes["rollout_n"] != int64(0) {
			t.Errorf("span %s lacks the step/rollout attributes: %v", s.Name, s.Attributes)
		}
		if s.End.Before(s.Start) {
			t.Errorf("span %s ends before it starts", s.Name)
		}
	}
	g1, g2 := spans[0], spans[3]
	var in1, in2, out2 map[string]any
	json.Unmarshal([]byte(g1.Inputs), &in1)
	json.Unmarshal([]byte(g2.Inputs), &in2)
	json.Unmarshal([]byte(g2.Outputs), &out2)
	if p, _ := in1["prompt"].(string); len(strings.Fields(p)) != 10 {
		t.Errorf("first generate prompt %q; want 10 decoded words", p)
	}
	if _, ok := in2["prompt_delta"].(string); !ok {
		t.Errorf("second generate inputs %s; want only the prompt delta", g2.Inputs)
	}
	if g2.Attributes["prompt_offset"] == nil || g2.Attributes["prompt_tokens"] == nil || g2.Attributes["response_tokens"] == nil {
		t.Errorf("second generate attributes %v", g2.Attributes)
	}
	if lp, ok := g1.Attributes["logprob_mean"].(float64); !ok || lp > 0 || lp < -2 {
		t.Errorf("logprob_mean %v", g1.Attributes["logprob_mean"])
	}
	if r, _ := out2["response"].(string); r == "" {
		t.Errorf("second generate outputs %s; want decoded response", g2.Outputs)
	}
	var rootOut map[string]any
	json.Unmarshal([]byte(root.Outputs), &rootOut)
	resp, _ := rootOut["response"].(string)
	if !strings.HasSuffix(resp, out2["response"].(string)) || !strings.Contains(root.Inputs, in1["prompt"].(string)) {
		t.Errorf("root text: inputs %s outputs %s", root.Inputs, root.Outputs)
	}
	tool := spans[2]
	if tool.Error == "" || !strings.Contains(tool.Outputs, "Error when executing tool") {
		t.Errorf("the failing tool call: error %q outputs %s", tool.Error, tool.Outputs)
	}
}

// Generate spans always keep the exact token ids; with token2text the decoded text is added
// beside them (rlhost sft --from-traces needs the ids, the viewer reads the text).
func TestTokenIDsWithToken2Text(t *testing.T) {
	mem := &tracingtest.Memory{}
	tr := newTracer(t, tracing.Config{Token2Text: true, Decode: tracingtest.Decode}, map[string]*tracingtest.Memory{"local": mem})
	tr.BeginStep(1, false, []int64{0})
	j := tr.Trajectory(tracing.TrajectoryAttrs{Step: 1})
	j.Generate(nil, []int{1, 2, 3}, []int{4, 5}, nil).End(nil, nil)
	j.Generate(nil, []int{1, 2, 3, 4, 5, 9}, []int{6}, nil).End(nil, nil)
	j.End(0.5, nil)
	closeTracer(t, tr)
	s := mem.Snapshot()
	d := func(ids ...int) string { b, _ := json.Marshal(tracingtest.Decode(ids)); return string(b) }
	want := []struct{ in, out string }{
		{`{"prompt":` + d(1, 2, 3) + `,"prompt_ids":[1,2,3]}`, `{"response":` + d(4, 5) + `,"response_ids":[4,5]}`},
		{`{"prompt_delta":` + d(9) + `,"prompt_delta_ids":[9]}`, `{"response":` + d(6) + `,"response_ids":[6]}`},
	}
	if len(s) != 3 {
		t.Fatalf("%d spans; want 2 generate and the root", len(s))
	}
	for i, w := range want {
		if s[i].Inputs != w.in || s[i].Outputs != w.out {
			t.Errorf("generate %d: inputs %s outputs %s; want %s %s", i, s[i].Inputs, s[i].Outputs, w.in, w.out)
		}
	}
	if s[1].Attributes["prompt_offset"] != int64(5) {
		t.Errorf("second generate: prompt_offset %v; want 5", s[1].Attributes["prompt_offset"])
	}
}

func TestTokenIDsWithoutToken2Text(t *testing.T) {
	mem := &tracingtest.Memory{}
	tr := newTracer(t, tracing.Config{}, map[string]*tracingtest.Memory{"local": mem})
	tr.BeginStep(1, false, []int64{0})
	j := tr.Trajectory(tracing.TrajectoryAttrs{Step: 1})
	j.Generate(nil, []int{1, 2, 3}, []int{4, 5}, nil).End(nil, nil)
	j.Generate(nil, []int{1, 2, 3, 4, 5, 9}, []int{6}, nil).End(nil, nil)
	j.End(0.5, nil)
	nan := tr.Trajectory(tracing.TrajectoryAttrs{Step: 1, SampleIndex: 1})
	nan.End(math.NaN(), nil) // a broken scorer must not lose the trajectory
	closeTracer(t, tr)
	s := mem.Snapshot()
	if len(s) != 4 || s[3].Attributes["reward"] != "NaN" {
		t.Errorf("NaN reward: %+v", s[len(s)-1])
	}
	if len(s) < 3 || s[0].Inputs != `{"prompt_ids":[1,2,3]}` || s[0].Outputs != `{"response_ids":[4,5]}` ||
		s[1].Inputs != `{"prompt_delta_ids":[9]}` || s[1].Attributes["prompt_offset"] != int64(5) {
		t.Fatalf("spans %+v", s)
	}
	if s[2].Attributes["prompt_tokens"] != int64(9) || s[2].Attributes["response_tokens"] != int64(3) || s[2].Attributes["reward"] != 0.5 {
		t.Errorf("root %v", s[2].Attributes)
	}
}

func TestNilSafe(t *testing.T) {
	var tr *tracing.Tracer
	tr.BeginStep(1, false, nil)
	j := tr.Trajectory(tracing.TrajectoryAttrs{})
	if j != nil {
		t.Fatal("nil tracer made a trajectory")
	}
	s := j.Start("generate", nil, 1)
	s.SetAttr("a", 1)
	s.End(nil, errors.New("x"))
	j.Generate(s, []int{1}, []int{2}, nil).End(nil, nil)
	j.End(1, nil)
	if m := tr.StepMetrics(); len(m) != 0 || tr.Close(context.Background()) != nil {
		t.Error("nil tracer metrics or close")
	}
	off, err := tracing.New(context.Background(), tracing.Config{Backends: []string{"none"}}, nil)
	if err != nil || off.Enabled() || off.Trajectory(tracing.TrajectoryAttrs{}) != nil {
		t.Errorf("backend none: %v %v", off, err)
	}
}

func TestConfigErrors(t *testing.T) {
	mems := map[string]*tracingtest.Memory{"local": {}}
	tests := []struct {
		cfg  tracing.Config
		want string
	}{
		{tracing.Config{Backends: []string{"none", "local"}}, `"none" turns tracing off`},
		{tracing.Config{Token2Text: true}, "token2text needs a Decode"},
		{tracing.Config{MaxSamplesPerStep: -1}, "max_samples_per_step"},
		{tracing.Config{Backends: []string{"local,mlflow"}}, `backend "mlflow"`},
	}
	for _, tt := range tests {
		_, err := tracing.New(context.Background(), tt.cfg, openMem(mems))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v; want an error containing %q", tt.cfg, err, tt.want)
		}
	}
}

// TestSeveralBackends: every backend gets every span; the metrics are per backend and summed.
func TestSeveralBackends(t *testing.T) {
	a, b := &tracingtest.Memory{}, &tracingtest.Memory{}
	tr := newTracer(t, tracing.Config{Backends: []string{"local", "mlflow"}}, map[string]*tracingtest.Memory{"local": a, "mlflow": b})
	tracingtest.Drive(tr, tracingtest.DriveOptions{Steps: 2, Batch: 3, N: 2})
	closeTracer(t, tr)
	// Per trajectory: 2 generate + parse + tool + root = 5 spans; 12 trajectories.
	if len(a.Snapshot()) != 60 || len(b.Snapshot()) != 60 {
		t.Fatalf("spans %d and %d; want 60 each", len(a.Snapshot()), len(b.Snapshot()))
	}
	m := tr.StepMetrics()
	if m["tracing/exported"] != 120 || m["tracing/local/exported"] != 60 || m["tracing/dropped"] != 0 {
		t.Errorf("metrics %v", m)
	}
	if a.Inits != 1 || a.Flushes != 1 || a.Shutdowns != 1 {
		t.Errorf("local backend: %d inits, %d flushes, %d shutdowns", a.Inits, a.Flushes, a.Shutdowns)
	}
}

func spanSet(t *testing.T, spans []trace.Span) map[string]bool {
	t.Helper()
	set := map[string]bool{}
	for _, s := range spans {
		if set[s.SpanID] {
			t.Errorf("span %s (%s) arrived twice", s.SpanID, s.Name)
		}
		set[s.SpanID] = true
	}
	return set
}

// TestOutageSpoolsAndRetries: the backend is down for a while; spans go to the spool on disk,
// the metrics say so, the rollout does not wait, and after the outage every span arrives once.
func TestOutageSpoolsAndRetries(t *testing.T) {
	restore := tracing.SetTiming(20*time.Millisecond, 20*time.Millisecond, 100*time.Millisecond)
	defer restore()
	var down atomic.Bool
	down.Store(true)
	mem := &tracingtest.Memory{Fail: func([]trace.Span) error {
		if down.Load() {
			return fmt.Errorf("connection refused: %w", trace.ErrUnavailable)
		}
		return nil
	}}
	dir := t.TempDir()
	tr := newTracer(t, tracing.Config{RunDir: dir}, map[string]*tracingtest.Memory{"local": mem})
	start := time.Now()
	total := 0
	for step := 1; step <= 4; step++ {
		tracingtest.Drive(tr, tracingtest.DriveOptions{FirstStep: step, Steps: 1, Batch: 4, N: 2})
		total += 4 * 2 * 5
		time.Sleep(60 * time.Millisecond)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("rollout took %s with the backend down; it must not wait for it", took)
	}
	m := tr.StepMetrics()
	if m["tracing/spooled"] == 0 || m["tracing/exported"] != 0 {
		t.Fatalf("during the outage: %v; want spans spooled, none exported", m)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "traces", "spool", "local", "*.jsonl"))
	if len(files) == 0 {
		t.Fatal("no spool files")
	}
	down.Store(false)
	closeTracer(t, tr)
	got := spanSet(t, mem.Snapshot())
	if len(got) != total {
		t.Errorf("%d spans arrived; want %d", len(got), total)
	}
	m = tr.StepMetrics()
	if m["tracing/exported"] != float64(total) || m["tracing/spooled"] != 0 || m["tracing/dropped"] != 0 {
		t.Errorf("after the outage: %v", m)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "traces", "spool", "local", "*")); len(files) != 0 {
		t.Errorf("spool not emptied: %v", files)
	}
}

// TestRestartedBackendIsReinitialised: a restarted plugin answers FailedPrecondition until it
// is initialised again; the tracer re-Inits and loses nothing.
func TestRestartedBackendIsReinitialised(t *testing.T) {
	restore := tracing.SetTiming(10*time.Millisecond, 10*time.Millisecond, 50*time.Millisecond)
	defer restore()
	mem := &tracingtest.Memory{RequireInit: true}
	tr := newTracer(t, tracing.Config{}, map[string]*tracingtest.Memory{"local": mem})
	tracingtest.Drive(tr, tracingtest.DriveOptions{Steps: 1, Batch: 2, N: 2})
	time.Sleep(100 * time.Millisecond)
	mem.Restart()
	tracingtest.Drive(tr, tracingtest.DriveOptions{FirstStep: 2, Steps: 1, Batch: 2, N: 2})
	closeTracer(t, tr)
	if got := len(spanSet(t, mem.Snapshot())); got != 40 {
		t.Errorf("%d spans arrived; want 40", got)
	}
	if mem.Inits != 2 {
		t.Errorf("%d Inits; want 2 (start, after the restart)", mem.Inits)
	}
}

// TestRejectedBatchIsDropped: a non-temporary error drops the batch, counted.
func TestRejectedBatchIsDropped(t *testing.T) {
	mem := &tracingtest.Memory{Fail: func([]trace.Span) error { return fmt.Errorf("bad span: %w", trace.ErrInvalidArgument) }}
	tr := newTracer(t, tracing.Config{}, map[string]*tracingtest.Memory{"local": mem})
	tracingtest.Drive(tr, tracingtest.DriveOptions{Steps: 1, Batch: 2, N: 1})
	closeTracer(t, tr)
	if m := tr.StepMetrics(); m["tracing/dropped"] != 10 || m["tracing/exported"] != 0 || m["tracing/spooled"] != 0 {
		t.Errorf("metrics %v; want 10 dropped", m)
	}
}

// TestQueueBound: a backend that hangs never blocks the rollout; beyond QueueSpans spans are
// dropped and counted, and memory stays bounded.
func TestQueueBound(t *testing.T) {
	release := make(chan struct{})
	mem := &tracingtest.Memory{Fail: func([]trace.Span) error { <-release; return nil }}
	tr := newTracer(t, tracing.Config{QueueSpans: 100}, map[string]*tracingtest.Memory{"local": mem})
	start := time.Now()
	tracingtest.Drive(tr, tracingtest.DriveOptions{Steps: 10, Batch: 10, N: 2}) // 1000 spans
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("rollout took %s with a hung backend", took)
	}
	m := tr.StepMetrics()
	if m["tracing/queued"] > 100 || m["tracing/dropped"] < 1000-100-512 {
		t.Errorf("metrics %v; want at most 100 queued and the rest (less one batch in flight) dropped", m)
	}
	close(release)
	closeTracer(t, tr)
	m = tr.StepMetrics()
	if m["tracing/exported"]+m["tracing/dropped"] != 1000 || float64(len(mem.Snapshot())) != m["tracing/exported"] {
		t.Errorf("after release: %v, %d stored; want exported + dropped = 1000", m, len(mem.Snapshot()))
	}
}

// TestSpoolLeftByACrashedRunIsReplayed: spool files in the run directory (the host died
// before the backend came back) are sent by the next tracer of that directory.
func TestSpoolLeftByACrashedRunIsReplayed(t *testing.T) {
	restore := tracing.SetTiming(10*time.Millisecond, 10*time.Millisecond, 50*time.Millisecond)
	defer restore()
	dir := t.TempDir()
	down := &tracingtest.Memory{Fail: func([]trace.Span) error { return trace.ErrUnavailable }}
	tr := newTracer(t, tracing.Config{RunDir: dir}, map[string]*tracingtest.Memory{"local": down})
	tracingtest.Drive(tr, tracingtest.DriveOptions{Steps: 1, Batch: 3, N: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	err := tr.Close(ctx)
	cancel()
	if err == nil || !strings.Contains(err.Error(), "still spooled") {
		t.Fatalf("Close with the backend down: %v; want spans still spooled", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "traces", "spool", "local")); err != nil {
		t.Fatal(err)
	}
	up := &tracingtest.Memory{}
	tr2 := newTracer(t, tracing.Config{RunDir: dir}, map[string]*tracingtest.Memory{"local": up})
	if m := tr2.StepMetrics(); m["tracing/spooled"] != 15 {
		t.Errorf("new tracer sees %v spooled; want 15", m["tracing/spooled"])
	}
	closeTracer(t, tr2)
	if got := len(spanSet(t, up.Snapshot())); got != 15 {
		t.Errorf("%d spooled spans replayed; want 15", got)
	}
}

// A span timed after the fact (a tool call the plugin ran and timed inside one Obs call) keeps
// the start and duration it was given, not the moment it was opened and ended.
func TestSetTiming(t *testing.T) {
	mem := &tracingtest.Memory{}
	tr := newTracer(t, tracing.Config{Experiment: "exp"}, map[string]*tracingtest.Memory{"local": mem})
	tr.BeginStep(1, false, []int64{0})
	traj := tr.Trajectory(tracing.TrajectoryAttrs{Step: 1, SampleIndex: 0, AgentName: "tool_agent", Task: "t"})
	start := time.Now().Add(-3 * time.Second)
	s := traj.Start("tool_call:calc", nil, nil)
	s.SetTiming(start, 1500*time.Millisecond)
	s.End(nil, nil)
	traj.End(0, nil)
	closeTracer(t, tr)
	for _, sp := range mem.Snapshot() {
		if sp.Name != "tool_call:calc" {
			continue
		}
		if !sp.Start.Equal(start) || sp.End.Sub(sp.Start) != 1500*time.Millisecond {
			t.Fatalf("span %s..%s; want %s + 1.5s", sp.Start, sp.End, start)
		}
		return
	}
	t.Fatal("no tool_call span exported")
}

func TestToken2TextDefault(t *testing.T) {
	for _, tc := range []struct {
		backends []string
		want     bool
	}{
		{nil, true}, {[]string{"local"}, true}, {[]string{"mlflow,local"}, true}, {[]string{"weave", "LOCAL"}, true},
		{[]string{"mlflow"}, false}, {[]string{"weave", "mlflow"}, false}, {[]string{"none"}, false},
	} {
		if got := tracing.Token2TextDefault(tc.backends); got != tc.want {
			t.Errorf("Token2TextDefault(%q) = %v; want %v", tc.backends, got, tc.want)
		}
	}
}

// TestStopThenEnd: a root stopped when the trajectory is scored and ended after the update
// (with its advantage) keeps the stop time as its end.
func TestStopThenEnd(t *testing.T) {
	mem := &tracingtest.Memory{}
	tr := newTracer(t, tracing.Config{}, map[string]*tracingtest.Memory{"local": mem})
	tr.BeginStep(1, false, []int64{0})
	j := tr.Trajectory(tracing.TrajectoryAttrs{Step: 1})
	j.Generate(nil, []int{1}, []int{2}, nil).End(nil, nil)
	j.Stop()
	stopped := time.Now()
	time.Sleep(20 * time.Millisecond)
	j.Root().SetAttr("advantage", -0.75)
	j.End(1, nil)
	closeTracer(t, tr)
	var root *trace.Span
	for i := range mem.Spans {
		if mem.Spans[i].ParentID == "" {
			root = &mem.Spans[i]
		}
	}
	if root == nil {
		t.Fatalf("no root span in %d spans", len(mem.Spans))
	}
	if root.End.After(stopped) {
		t.Errorf("root ends %s after Stop; want at Stop", root.End.Sub(stopped))
	}
	if root.Attributes["advantage"] != -0.75 || root.Attributes["reward"] != 1.0 {
		t.Errorf("root attributes %v", root.Attributes)
	}
}

// TestRelay: a Config.Relay tracer (a rank other than 0) opens no backend, makes the
// trajectories one that ships would (the same sampling: 3 samples of 8 a step, every
// rollout of each) and keeps their spans; encoded, decoded and shipped by another tracer
// (rank 0's) they reach its backend as they were made, the attributes' types kept.
// Beyond QueueSpans spans are dropped and counted.
func TestRelay(t *testing.T) {
	noOpen := func(context.Context, string) (trace.Backend, error) {
		t.Fatal("a relay tracer opened a backend")
		return nil, nil
	}
	relay, err := tracing.New(context.Background(), tracing.Config{Relay: true, MaxSamplesPerStep: 3, Seed: 1,
		Token2Text: true, Decode: tracingtest.Decode}, noOpen)
	if err != nil {
		t.Fatal(err)
	}
	if !relay.Enabled() {
		t.Fatal("a relay tracer traces nothing")
	}
	traced := tracingtest.Drive(relay, tracingtest.DriveOptions{Steps: 2, Batch: 8, N: 2})
	if traced != 2*3*2 {
		t.Fatalf("the relay traced %d trajectories; want %d", traced, 2*3*2)
	}
	spans, dropped := relay.TakeRelayed()
	if len(spans) != traced*5 || dropped != 0 {
		t.Fatalf("the relay kept %d spans (dropped %d); want %d", len(spans), dropped, traced*5)
	}
	if again, _ := relay.TakeRelayed(); len(again) != 0 {
		t.Fatalf("TakeRelayed gave %d spans twice", len(again))
	}
	var buf strings.Builder
	if err := tracing.EncodeSpans(&buf, spans); err != nil {
		t.Fatal(err)
	}
	decoded, err := tracing.DecodeSpans(strings.NewReader(buf.String()), "rank 1's spans")
	if err != nil {
		t.Fatal(err)
	}
	mem := &tracingtest.Memory{}
	lead := newTracer(t, tracing.Config{Experiment: "e"}, map[string]*tracingtest.Memory{"local": mem})
	lead.Relayed(decoded)
	closeTracer(t, lead)
	got := mem.Snapshot()
	if len(got) != len(spans) {
		t.Fatalf("rank 0 shipped %d spans; want %d", len(got), len(spans))
	}
	for i, s := range spans {
		g := got[i]
		if g.SpanID != s.SpanID || g.TraceID != s.TraceID || g.ParentID != s.ParentID || g.Name != s.Name ||
			!g.Start.Equal(s.Start) || !g.End.Equal(s.End) || g.Inputs != s.Inputs || g.Outputs != s.Outputs || g.Error != s.Error {
			t.Fatalf("span %d shipped as %+v; made as %+v", i, g, s)
		}
		if fmt.Sprintf("%#v", g.Attributes) != fmt.Sprintf("%#v", s.Attributes) {
			t.Fatalf("span %d's attributes shipped as %#v; made as %#v", i, g.Attributes, s.Attributes)
		}
	}

	small, err := tracing.New(context.Background(), tracing.Config{Relay: true, QueueSpans: 7}, noOpen)
	if err != nil {
		t.Fatal(err)
	}
	tracingtest.Drive(small, tracingtest.DriveOptions{Steps: 1, Batch: 2, N: 1})
	if kept, dropped := small.TakeRelayed(); len(kept) != 7 || dropped != 3 {
		t.Errorf("a relay bounded to 7 spans kept %d of 10 and dropped %d", len(kept), dropped)
	}
}
