package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	hostplugin "github.com/rlhost/rlhost/host/plugin"
	"github.com/rlhost/rlhost/host/tracing"
	"github.com/rlhost/rlhost/host/tracing/tracingtest"
	"github.com/rlhost/rlhost/internal/mlflowrest/mlflowtest"
	"github.com/rlhost/rlhost/plugins/local"
)

var buildTraceLocal sync.Once

// traceRun drives simulated rollouts through host/tracing and the real rlhost-trace-local
// plugin into a new run directory, and returns it.
func traceRun(t *testing.T, cfg tracing.Config, o tracingtest.DriveOptions) (string, *tracing.Tracer) {
	t.Helper()
	buildTraceLocal.Do(func() {
		out, err := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "rlhost-trace-local"), "../../plugins/local/cmd/rlhost-trace-local").CombinedOutput()
		if err != nil {
			t.Fatalf("building the local trace plugin: %v\n%s", err, out)
		}
	})
	if cfg.RunDir == "" {
		cfg.RunDir = t.TempDir()
	}
	cfg.Experiment, cfg.Project, cfg.RunID = "gsm8k-grpo", "rlhost-tests", "run-1"
	tr, err := tracing.New(context.Background(), cfg, tracing.OpenPlugin(hostplugin.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	tracingtest.Drive(tr, o)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return cfg.RunDir, tr
}

func TestTracesEndToEnd(t *testing.T) {
	dir, tr := traceRun(t, tracing.Config{Token2Text: true, Decode: tracingtest.Decode, MaxSamplesPerStep: 2, Seed: 3},
		tracingtest.DriveOptions{Steps: 3, Batch: 4, N: 2})
	if m := tr.StepMetrics(); m["tracing/exported"] != 3*2*2*5 || m["tracing/dropped"] != 0 || m["tracing/spooled"] != 0 {
		t.Errorf("metrics %v; want 60 spans exported", m)
	}
	if _, err := os.Stat(filepath.Join(dir, "traces", "traces.db")); err != nil {
		t.Fatal(err)
	}

	out, _, err := run(t, "traces", "list", "--run", dir)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 13 || !strings.HasPrefix(lines[0], "TRACE") {
		t.Fatalf("traces list: %d lines:\n%s", len(lines), out)
	}
	out, _, err = run(t, "traces", "list", "--run", dir, "--step", "2", "--rollout", "1", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var rows []local.Trajectory
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var r local.Trajectory
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("%v: %s", err, l)
		}
		rows = append(rows, r)
	}
	if len(rows) != 2 || rows[0].Step != 2 || rows[0].RolloutN != 1 || rows[0].Response == "" {
		t.Fatalf("filtered list: %+v", rows)
	}
	out, _, err = run(t, "traces", "list", "--run", dir, "--by-step")
	if err != nil || !strings.Contains(out, "mean reward") || len(strings.Split(strings.TrimSpace(out), "\n")) != 4 {
		t.Errorf("--by-step: %v\n%s", err, out)
	}

	out, _, err = run(t, "traces", "show", "--run", dir, rows[0].TraceID[:10])
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"trace " + rows[0].TraceID, "step 2", "[user]", "[assistant]", "[tool calc_gsm8k_reward]", "[context]", "gsm8k-grpo"} {
		if !strings.Contains(out, want) {
			t.Errorf("traces show lacks %q:\n%s", want, out)
		}
	}

	sample := strconv.FormatInt(rows[0].SampleIndex, 10)
	out, _, err = run(t, "traces", "compare", "--run", dir, "--sample", sample)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "sample "+sample) || !strings.Contains(out, "step") || !strings.Contains(out, "REWARD") {
		t.Errorf("traces compare:\n%s", out)
	}

	for _, ext := range []string{"jsonl", "parquet"} {
		path := filepath.Join(t.TempDir(), "traces."+ext)
		_, stderr, err := run(t, "traces", "export", "--run", dir, "--step", "1-2", "-o", path)
		if err != nil || !strings.Contains(stderr, "wrote 8 trajectories") {
			t.Errorf("export %s: %v %s", ext, err, stderr)
		}
		if st, err := os.Stat(path); err != nil || st.Size() == 0 {
			t.Errorf("export %s: %v", ext, err)
		}
	}

	for _, tc := range []struct{ args, want string }{
		{"list --run " + dir + " --step x", `step "x"`},
		{"list --run " + dir + " --reward a-b", `reward "a-b"`},
		{"show --run " + dir + " ffffffff", "no trajectory"},
		{"list --run " + t.TempDir(), "traces.db"},
		{"serve --run " + dir + " --addr 0.0.0.0:0", "loopback"},
		{"export --run " + dir + " -o x.csv", "--format"},
	} {
		_, _, err := run(t, append([]string{"traces"}, strings.Fields(tc.args)...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("traces %s: %v; want an error containing %q", tc.args, err, tc.want)
		}
	}
}

// childPIDs returns the processes whose parent is this test and whose name starts with prefix.
func childPIDs(t *testing.T, prefix string) []int {
	t.Helper()
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		name := s[open+1 : close]
		fields := strings.Fields(s[close+1:])
		if len(fields) < 2 || !strings.HasPrefix(prefix, name) && !strings.HasPrefix(name, prefix) {
			continue
		}
		if ppid, _ := strconv.Atoi(fields[1]); ppid == os.Getpid() {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, pid)
		}
	}
	return out
}

// TestTracePluginCrash: the local trace plugin is killed mid-run. The rollout goes on without
// waiting, the plugin is restarted and re-initialised, the spans are spooled meanwhile, and
// every span arrives.
func TestTracePluginCrash(t *testing.T) {
	dir := t.TempDir()
	killed := false
	var sawSpool float64
	var tr *tracing.Tracer
	o := tracingtest.DriveOptions{Steps: 6, Batch: 4, N: 2, OnStep: func(step int) {
		if step == 2 {
			time.Sleep(400 * time.Millisecond) // let step 1..2 reach the store
			pids := childPIDs(t, "rlhost-trace-lo")
			if len(pids) != 1 {
				t.Errorf("found %d local trace plugin processes: %v", len(pids), pids)
				return
			}
			syscall.Kill(pids[0], syscall.SIGKILL)
			killed = true
		}
		if step > 2 {
			deadline := time.Now().Add(3 * time.Second)
			for sawSpool == 0 && time.Now().Before(deadline) && step == 3 {
				sawSpool = tr.StepMetrics()["tracing/spooled"]
				time.Sleep(5 * time.Millisecond)
			}
		}
	}}
	buildTraceLocal.Do(func() {
		out, err := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "rlhost-trace-local"), "../../plugins/local/cmd/rlhost-trace-local").CombinedOutput()
		if err != nil {
			t.Fatalf("building the local trace plugin: %v\n%s", err, out)
		}
	})
	var err error
	tr, err = tracing.New(context.Background(), tracing.Config{RunDir: dir, Experiment: "crash"}, tracing.OpenPlugin(hostplugin.Options{}))
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	tracingtest.Drive(tr, o)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if !killed {
		t.Fatal("the plugin was not killed")
	}
	if sawSpool == 0 {
		t.Error("no spans were spooled while the plugin was down")
	}
	m := tr.StepMetrics()
	if m["tracing/exported"] != 6*8*5 || m["tracing/dropped"] != 0 || m["tracing/spooled"] != 0 {
		t.Errorf("metrics %v; want 240 spans exported", m)
	}
	st, err := local.OpenRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var spans, trajs int
	st.DB().QueryRow(`SELECT count(*) FROM spans`).Scan(&spans)
	st.DB().QueryRow(`SELECT count(*) FROM trajectories`).Scan(&trajs)
	if spans != 240 || trajs != 48 {
		t.Errorf("store has %d spans and %d trajectories; want 240 and 48", spans, trajs)
	}
	if runs, _ := st.Runs(context.Background()); len(runs) != 1 {
		t.Errorf("runs %v", runs)
	}
	t.Logf("6 steps with a crash took %s", time.Since(start))
	_ = fmt.Sprint
}

// TestTracesViewerInChromium serves a run with `rlhost traces serve` and drives the viewer in
// headless Chromium (plugins/local/viewer/testdata/browser_test.cjs): the list, a filter, a
// trajectory as a chat, the compare view with its diff; screenshots go to
// RLHOST_VIEWER_SCREENSHOTS (default: a temporary directory). It needs /usr/bin/chromium and
// playwright-core (make tracing-deps); without them it is skipped, unless RLHOST_VIEWER_E2E=1
// (as `make test-tracing` sets), when it fails.
func TestTracesViewerInChromium(t *testing.T) {
	nodePath := viewerDeps(t)
	dir, _ := traceRun(t, tracing.Config{Token2Text: true, Decode: tracingtest.Decode, Seed: 5},
		tracingtest.DriveOptions{Steps: 3, Batch: 2, N: 2})
	st, err := local.OpenRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	shots := os.Getenv("RLHOST_VIEWER_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	var seen struct {
		Errors   []string
		AllRows  int
		Filtered []struct {
			Step   int
			Reward float64
		}
		Count, Meta   string
		Roles         []string
		ToolText      []string
		OverviewSteps []int
		Cards         int
		Ins, Del      int
		Headings      []string
	}
	serveAndBrowse(t, st, nil, nodePath, "../../plugins/local/viewer/testdata/browser_test.cjs", shots, &seen)
	if len(seen.Errors) > 0 {
		t.Errorf("page errors: %v", seen.Errors)
	}
	if seen.AllRows != 12 {
		t.Errorf("the list shows %d trajectories; want 12", seen.AllRows)
	}
	want, _ := st.Count(context.Background(), local.Filter{StepMin: ptr(int64(2)), StepMax: ptr(int64(2)), RewardMin: ptr(0.5)})
	if len(seen.Filtered) != want || want == 0 {
		t.Errorf("after filtering step 2, reward >= 0.5: %d rows; the store has %d", len(seen.Filtered), want)
	}
	for _, r := range seen.Filtered {
		if r.Step != 2 || r.Reward < 0.5 {
			t.Errorf("filtered row %+v", r)
		}
	}
	roles := strings.Join(seen.Roles, ",")
	for _, r := range []string{"user", "assistant", "parse", "tool", "context"} {
		if !strings.Contains(roles, r) {
			t.Errorf("the chat lacks a %s message: %s", r, roles)
		}
	}
	if len(seen.ToolText) == 0 || !strings.Contains(seen.ToolText[0], "calc_gsm8k_reward") || !strings.Contains(seen.Meta, "step 2") {
		t.Errorf("trajectory view: meta %q, tools %q", seen.Meta, seen.ToolText)
	}
	if fmt.Sprint(seen.OverviewSteps) != "[1 2 3]" || seen.Cards != 4 || seen.Ins == 0 || seen.Del == 0 {
		t.Errorf("compare view: steps %v, %d cards, %d insertions, %d deletions", seen.OverviewSteps, seen.Cards, seen.Ins, seen.Del)
	}
	if len(seen.Headings) != 4 || !strings.HasPrefix(seen.Headings[0], "step 1") || !strings.HasPrefix(seen.Headings[1], "step 3") {
		t.Errorf("compare headings %q; want step 1 beside step 3", seen.Headings)
	}
	for _, f := range []string{"list.png", "trajectory.png", "compare.png"} {
		if st, err := os.Stat(filepath.Join(shots, f)); err != nil || st.Size() < 1000 {
			t.Errorf("screenshot %s: %v", f, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

var buildTraceMLflow sync.Once

// TestTracesMLflowOutage: a run traced to local and mlflow at once; the MLflow server is
// stopped after step 2 and started again during step 5. No step waits for it, the spans are
// spooled meanwhile, and afterwards every trajectory is in MLflow with all its spans, found
// by tags.step and linked to the run. The run config and a tool output carry the
// WANDB_API_KEY value: it is nowhere in the run directory, the host log or MLflow's store.
func TestTracesMLflowOutage(t *testing.T) {
	srv := mlflowtest.Start(t)
	buildTraceMLflow.Do(func() {
		out, err := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "rlhost-trace-mlflow"), "../../plugins/mlflow/cmd/rlhost-trace-mlflow").CombinedOutput()
		if err != nil {
			t.Fatalf("building the mlflow trace plugin: %v\n%s", err, out)
		}
	})
	buildTraceLocal.Do(func() {
		out, err := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "rlhost-trace-local"), "../../plugins/local/cmd/rlhost-trace-local").CombinedOutput()
		if err != nil {
			t.Fatalf("building the local trace plugin: %v\n%s", err, out)
		}
	})
	key := fmt.Sprintf("wandb-test-key-%d", time.Now().UnixNano())
	t.Setenv("WANDB_API_KEY", key)
	dir := t.TempDir()
	var hostLog strings.Builder
	var logMu sync.Mutex
	logger := hclog.New(&hclog.LoggerOptions{Output: writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return hostLog.Write(p)
	}), Level: hclog.Debug})
	cfg := tracing.Config{Backends: []string{"local", "mlflow"}, Token2Text: true, Decode: tracingtest.Decode, RunDir: dir,
		Project: "rlhost-outage", Experiment: "outage", RunID: "run-7", RunName: "outage-run",
		BackendConfig: map[string]map[string]any{"mlflow": {"tracking_uri": srv.URI, "timeout_seconds": 5.0}},
		RunConfigJSON: `{"trainer":{"project_name":"rlhost-outage","wandb_api_key":"` + key + `","note":"key ` + key + `"}}`,
		Logger:        logger}
	tr, err := tracing.New(context.Background(), cfg, tracing.OpenPlugin(hostplugin.Options{Logger: logger}))
	if err != nil {
		t.Fatal(err)
	}
	var restarted chan error
	var slowest time.Duration
	last := time.Now()
	var spooledDuringOutage float64
	o := tracingtest.DriveOptions{Steps: 6, Batch: 3, N: 2, FirstStep: 1, OnStep: func(step int) {
		slowest = max(slowest, time.Since(last))
		switch step {
		case 2:
			time.Sleep(500 * time.Millisecond) // steps 1-2 reach MLflow
			srv.Stop()
		case 4:
			time.Sleep(500 * time.Millisecond)
			spooledDuringOutage = tr.StepMetrics()["tracing/mlflow/spooled"]
			restarted = make(chan error, 1)
			go func() { restarted <- srv.Restart() }()
		}
		last = time.Now()
	}}
	// A tool output that leaks the key.
	tracingtest.Drive(tr, o)
	j := tr.Trajectory(tracing.TrajectoryAttrs{Step: 6, SampleIndex: 99})
	j.Start("tool_call:env", nil, map[string]any{"cmd": "env"}).End(map[string]any{"text": "WANDB_API_KEY=" + key}, nil)
	j.End(0, nil)
	if slowest > 2*time.Second {
		t.Errorf("a step took %s while MLflow was down; tracing must not block the rollout", slowest)
	}
	if spooledDuringOutage == 0 {
		t.Errorf("nothing spooled while MLflow was down: %v", tr.StepMetrics())
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := tr.Close(ctx); err != nil {
		t.Fatal(err)
	}
	const spans = 6*3*2*5 + 2
	m := tr.StepMetrics()
	if m["tracing/mlflow/exported"] != spans || m["tracing/local/exported"] != spans || m["tracing/dropped"] != 0 || m["tracing/spooled"] != 0 {
		t.Errorf("metrics %v; want %d spans exported to each backend", m, spans)
	}

	var exp struct {
		Experiment struct {
			ID string `json:"experiment_id"`
		} `json:"experiment"`
	}
	srv.Do(t, "/api/2.0/mlflow/experiments/get-by-name?experiment_name=rlhost-outage", nil, &exp)
	runIDs := map[string]bool{}
	total := 0
	for step := 1; step <= 6; step++ {
		infos := srv.Search(t, exp.Experiment.ID, fmt.Sprintf("tags.step = '%d'", step))
		want := 6
		if step == 6 {
			want = 7
		}
		if len(infos) != want {
			t.Errorf("tags.step = '%d': %d traces; want %d", step, len(infos), want)
		}
		for _, ti := range infos {
			runIDs[ti.Metadata["mlflow.sourceRun"]] = true
			n := len(srv.Spans(t, ti.TraceID))
			total += n
		}
	}
	if total != spans {
		t.Errorf("MLflow holds %d spans of the run; want %d", total, spans)
	}
	if len(runIDs) != 1 || runIDs[""] {
		t.Errorf("traces linked to runs %v; want one run", runIDs)
	}

	// Secrets: grep everything the run wrote, the host log, and MLflow's store.
	logMu.Lock()
	logText := hostLog.String()
	logMu.Unlock()
	if strings.Contains(logText, key) {
		t.Error("the host log contains the API key")
	}
	for _, root := range []string{dir, srv.Dir()} {
		filepath.Walk(root, func(p string, info os.FileInfo, err error) error {
			if err != nil || info.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(p)
			if strings.Contains(string(b), key) {
				t.Errorf("%s contains the API key", p)
			}
			return nil
		})
	}
	st, err := local.OpenRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var rc string
	st.DB().QueryRow(`SELECT run_config FROM runs`).Scan(&rc)
	if !strings.Contains(rc, `"wandb_api_key":"***"`) {
		t.Errorf("stored run config %s; want the key redacted", rc)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
