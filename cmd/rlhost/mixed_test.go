package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/host/data"
	"github.com/rlhost/rlhost/host/metrics"
)

// arithPlugin builds the examples/arith plugin (its own module, depending only on the SDK).
func arithPlugin(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "rlhost-task-arith")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..", "examples", "arith")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building examples/arith: %v\n%s", err, out)
	}
	return bin
}

// mixedData preprocesses a few GSM8K and arith records with their plugins: the parquet
// directories of the two tasks (train and test splits of 4 rows each).
func mixedData(t *testing.T, arith string) (gsmDir, arithDir string) {
	t.Helper()
	gsmRaw, arithRaw := t.TempDir(), t.TempDir()
	gsm := []string{rec1, rec2,
		`{"question": "Sam reads 5 pages a day for 6 days. How many pages?", "answer": "5*6=<<5*6=30>>30\n#### 30"}`,
		`{"question": "A box holds 12 eggs. How many eggs are in 3 boxes?", "answer": "12*3=<<12*3=36>>36\n#### 36"}`}
	var ar []string
	for i := 0; i < 4; i++ {
		ar = append(ar, fmt.Sprintf(`{"a": %d, "op": "+", "b": %d}`, i+2, 3*i+1))
	}
	for _, split := range []string{"train", "test"} {
		writeFile(t, filepath.Join(gsmRaw, split+".jsonl"), strings.Join(gsm, "\n")+"\n")
		writeFile(t, filepath.Join(arithRaw, split+".jsonl"), strings.Join(ar, "\n")+"\n")
	}
	gsmDir, arithDir = filepath.Join(t.TempDir(), "gsm8k"), filepath.Join(t.TempDir(), "arith")
	if _, stderr, err := run(t, "preprocess", "--task", "gsm8k", "--input", gsmRaw, "--output-dir", gsmDir); err != nil {
		t.Fatalf("preprocess gsm8k: %v\n%s", err, stderr)
	}
	if _, stderr, err := run(t, "preprocess", "--task", arith, "--input", arithRaw, "--output-dir", arithDir); err != nil {
		t.Fatalf("preprocess arith: %v\n%s", err, stderr)
	}
	return gsmDir, arithDir
}

// pythonMathData preprocesses two GSM8K records (train and test splits) with the
// examples/python-math plugin: the plugin's path and the parquet directory.
func pythonMathData(t *testing.T) (plugin, dataDir string) {
	t.Helper()
	plugin, _ = filepath.Abs(filepath.Join("..", "..", "examples", "python-math", "rlhost-task-python-math"))
	raw := t.TempDir()
	for _, split := range []string{"train", "test"} {
		writeFile(t, filepath.Join(raw, split+".jsonl"), rec1+"\n"+rec2+"\n")
	}
	dataDir = filepath.Join(t.TempDir(), "pm")
	if _, stderr, err := run(t, "preprocess", "--task", plugin, "--input", raw, "--output-dir", dataDir); err != nil {
		t.Fatalf("preprocess python-math: %v\n%s", err, stderr)
	}
	return plugin, dataDir
}

// mixedRun is the shape of a short mixed-task training run of the default model: batch prompts x 2
// rollouts, the whole batch one mini-batch and one micro-batch, responses of at most
// responseLen tokens in at most turns assistant turns, steps steps, no validation before
// training.
type mixedRun struct{ batch, responseLen, turns, steps int }

// overrides are the train command's overrides for the run, with its run_dir.
func (r mixedRun) overrides(t *testing.T, runDir string) []string {
	return []string{
		fmt.Sprintf("data.train_batch_size=%d", r.batch), "actor_rollout_ref.rollout.n=2",
		fmt.Sprintf("data.max_response_length=%d", r.responseLen),
		fmt.Sprintf("actor_rollout_ref.actor.ppo_mini_batch_size=%d", r.batch),
		fmt.Sprintf("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=%d", r.batch),
		fmt.Sprintf("actor_rollout_ref.rollout.multi_turn.max_assistant_turns=%d", r.turns),
		"actor_rollout_ref.model.path=" + repoModel(t), "trainer.run_dir=" + runDir,
		fmt.Sprintf("trainer.total_training_steps=%d", r.steps), "trainer.val_before_train=false",
	}
}

// train runs `rlhost train` with args followed by the run's overrides and returns the steps
// of its metrics.jsonl, failing unless the run logged all of them.
func (r mixedRun) train(t *testing.T, runDir string, args ...string) []metrics.Step {
	t.Helper()
	_, stderr, err := run(t, append(append([]string{"train"}, args...), r.overrides(t, runDir)...)...)
	if err != nil {
		t.Fatalf("train %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	steps, err := metrics.ReadJSONL(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil || len(steps) != r.steps {
		t.Fatalf("metrics: %d steps, %v; want %d", len(steps), err, r.steps)
	}
	return steps
}

// traceSource is a trace's task and data_source as `rlhost traces list --json` gives them.
type traceSource struct{ task, dataSource string }

// traceSources lists the run's traces (at least one: an empty list fails the test).
func traceSources(t *testing.T, runDir string) []traceSource {
	t.Helper()
	stdout, _, err := run(t, "traces", "list", "--run", runDir, "--json", "--limit", "1000")
	if err != nil {
		t.Fatal(err)
	}
	var out []traceSource
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var tr map[string]any
		if err := json.Unmarshal([]byte(line), &tr); err != nil {
			t.Fatalf("traces list --json: %v: %s", err, line)
		}
		var ts traceSource
		for k, v := range tr {
			switch strings.ToLower(k) {
			case "task":
				ts.task, _ = v.(string)
			case "data_source", "datasource":
				ts.dataSource, _ = v.(string)
			}
		}
		out = append(out, ts)
	}
	return out
}

// A mixed run: two real plugins (gsm8k built in, arith a third-party example) from one
// command, rows routed by data_source, weighted sampling, metrics and validation per task and
// per data_source, traces of both tasks.
func TestTrainMixedTasks(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	arith := arithPlugin(t)
	gsm, ar := mixedData(t, arith)
	dir := filepath.Join(t.TempDir(), "run")
	steps := mixedRun{batch: 4, responseLen: 16, turns: 2, steps: 2}.train(t, dir, "--task", "gsm8k", "--task", arith,
		"data.train_files=["+filepath.Join(gsm, "train.parquet")+", "+filepath.Join(ar, "tr*n.parquet")+"]",
		"data.val_files=["+filepath.Join(gsm, "test.parquet")+", "+filepath.Join(ar, "test.parquet")+"]",
		"data.sampling_weights={openai/gsm8k: 1, arith: 1}", "task.reward_weights.arith=0.5",
		"data.val_max_samples=2", "actor_rollout_ref.rollout.max_num_seqs=8", "trainer.test_freq=2")
	var gTraj, aTraj float64
	for _, s := range steps {
		gTraj += s.Values["task/gsm8k/trajectories"]
		aTraj += s.Values["task/arith/trajectories"]
		if n := s.Values["task/gsm8k/trajectories"] + s.Values["task/arith/trajectories"]; n != 8 {
			t.Errorf("step %d: %v trajectories over the two tasks, want 4 prompts x 2", s.Step, n)
		}
	}
	if gTraj == 0 || aTraj == 0 {
		t.Errorf("over 2 steps of 4 prompts at weights 1:1, gsm8k had %v and arith %v trajectories", gTraj, aTraj)
	}
	last := steps[1].Values
	for _, k := range []string{"val-core/openai/gsm8k/reward/mean@1", "val-core/arith/reward/mean@1",
		"val-core/task:gsm8k/reward/mean@1", "val-core/task:arith/reward/mean@1", "critic/score/mean", "actor/pg_loss"} {
		if _, ok := last[k]; !ok {
			t.Errorf("step 2 lacks %s", k)
		}
	}
	for _, s := range steps {
		for _, tn := range []string{"gsm8k", "arith"} {
			if s.Values["task/"+tn+"/trajectories"] > 0 {
				for _, k := range []string{"task/" + tn + "/score/mean", "task/" + tn + "/response_length/mean"} {
					if _, ok := s.Values[k]; !ok {
						t.Errorf("step %d lacks %s", s.Step, k)
					}
				}
			}
		}
	}
	tasks := map[string]string{} // task -> data_source of its traces
	for _, tr := range traceSources(t, dir) {
		if o, ok := tasks[tr.task]; ok && o != tr.dataSource {
			t.Errorf("task %s has traces of data sources %s and %s", tr.task, o, tr.dataSource)
		}
		tasks[tr.task] = tr.dataSource
	}
	if tasks["gsm8k"] != "openai/gsm8k" || tasks["arith"] != "arith" {
		t.Errorf("traces by task and data_source: %v; want gsm8k: openai/gsm8k and arith: arith", tasks)
	}
}

// Rows of a data_source no loaded task serves stop the run before step 1, and the error
// names the file, the row and the loaded tasks with their sources.
func TestTrainMixedUnknownDataSource(t *testing.T) {
	arith := arithPlugin(t)
	gsm, ar := mixedData(t, arith)
	stray := filepath.Join(t.TempDir(), "stray.parquet")
	rows := []data.Row{{DataSource: "arith", Prompt: []data.Message{{Role: "user", Content: "1+1?"}},
		RewardModel: data.RewardModel{Style: "rule", GroundTruth: "2"}},
		{DataSource: "searchR1_nq", Prompt: []data.Message{{Role: "user", Content: "who?"}},
			RewardModel: data.RewardModel{Style: "rule", GroundTruth: "x"}}}
	if err := data.WriteParquet(stray, rows); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	_, _, err := run(t, "train", "--task", "gsm8k,"+arith,
		"data.train_files=["+filepath.Join(gsm, "test.parquet")+", "+filepath.Join(ar, "train.parquet")+", "+stray+"]",
		"data.val_files="+filepath.Join(ar, "test.parquet"), "actor_rollout_ref.model.path="+repoModel(t), "trainer.run_dir="+dir)
	if err == nil {
		t.Fatal("a run with rows of an unserved data_source started")
	}
	for _, want := range []string{stray + " row 1", `data_source "searchR1_nq"`, "gsm8k (openai/gsm8k); arith (arith)"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "metrics.jsonl")); err == nil {
		t.Error("the run logged metrics before failing")
	}
}

// A task plugin that crashes is attributed: its trajectories are retried and counted under
// its name, the other task's are not.
func TestTrainMixedCrashAttributed(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	crashy := filepath.Join(t.TempDir(), "rlhost-task-gsm8k")
	if out, err := exec.Command("go", "build", "-o", crashy, "-ldflags", "-X main.every=5", "../../host/trainer/testdata/crashy").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	arith := arithPlugin(t)
	gsm, ar := mixedData(t, arith)
	dir := filepath.Join(t.TempDir(), "run")
	steps := mixedRun{batch: 4, responseLen: 12, turns: 2, steps: 2}.train(t, dir, "--task", crashy, "--task", arith,
		"data.train_files=["+filepath.Join(gsm, "test.parquet")+", "+filepath.Join(ar, "train.parquet")+"]",
		"data.sampling_weights={openai/gsm8k: 1, arith: 1}", "data.val_files="+filepath.Join(ar, "test.parquet"))
	var g, a float64
	for _, s := range steps {
		g += s.Values["task/gsm8k/retried"] + s.Values["task/gsm8k/dropped"]
		a += s.Values["task/arith/retried"] + s.Values["task/arith/dropped"]
	}
	if g < 1 || a != 0 {
		t.Errorf("retried+dropped: gsm8k (crashing) %v, arith %v; want >= 1 and 0", g, a)
	}
}

// A mixed run of a Go plugin (examples/arith) and a Python one (examples/python-math, through
// the Python SDK): one command, both tasks' trajectories in one batch, metrics per task.
func TestTrainMixedGoAndPython(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	pythonForSDK(t)
	pm, pmData := pythonMathData(t)
	arith := arithPlugin(t)
	_, ar := mixedData(t, arith)
	dir := filepath.Join(t.TempDir(), "run")
	steps := mixedRun{batch: 4, responseLen: 12, turns: 2, steps: 1}.train(t, dir, "--task", arith+","+pm,
		"data.train_files=["+filepath.Join(pmData, "train.parquet")+", "+filepath.Join(ar, "train.parquet")+"]",
		"data.val_files=["+filepath.Join(pmData, "test.parquet")+", "+filepath.Join(ar, "test.parquet")+"]",
		"data.sampling_weights={python-math: 1, arith: 1}", "data.val_max_samples=1", "trainer.test_freq=1")
	s := steps[0].Values
	if n := s["task/arith/trajectories"] + s["task/python-math/trajectories"]; n != 8 {
		t.Errorf("%v trajectories over arith and python-math, want 8: %v", n, s)
	}
	for _, k := range []string{"val-core/task:arith/reward/mean@1", "val-core/task:python-math/reward/mean@1",
		"val-core/python-math/reward/mean@1", "val-core/arith/reward/mean@1"} {
		if _, ok := s[k]; !ok {
			t.Errorf("step 1 lacks %s", k)
		}
	}
}

// pythonForSDK is the Python that has the rlhost SDK (RLHOST_PYTHON, else make setup-python's
// virtualenv); the test is skipped without one (failed under CI).
func pythonForSDK(t *testing.T) string {
	t.Helper()
	py := os.Getenv("RLHOST_PYTHON")
	if py == "" {
		home, _ := os.UserHomeDir()
		py = filepath.Join(home, ".cache", "rlhost", "python-venv", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("no Python with the rlhost SDK at %s: run make setup-python", py)
		}
		t.Skipf("no Python with the rlhost SDK at %s: run make setup-python", py)
	}
	return py
}

// freeAddr returns a free 127.0.0.1 port.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Three plugins in one run, one of them in Python: gsm8k (built in), dr (deep research over a
// BM25 retriever the plugin starts on the small WordNet sample) and examples/python-math
// (Python SDK, its own data_source). One command trains 3 steps of 6 prompts drawn at weights
// 1:1:1 per task (dr's three hop-count data sources share its third); metrics and
// validation are per task and per data_source, and the traces name each task.
func TestTrainThreePlugins(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	pythonForSDK(t)
	bins := t.TempDir()
	for name, pkg := range map[string]string{"rlhost-task-dr": "../../tasks/dr/cmd/rlhost-task-dr", "rlhost-retriever": "../retriever"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bins, name), pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	dr := filepath.Join(bins, "rlhost-task-dr")
	gsm, _ := mixedData(t, arithPlugin(t))
	// python-math reads GSM8K records; dr its own QA records (the committed WordNet sample).
	pm, pmData := pythonMathData(t)
	drTestdata, _ := filepath.Abs(filepath.Join("..", "..", "tasks", "dr", "testdata"))
	drData := filepath.Join(t.TempDir(), "dr")
	if _, stderr, err := run(t, "preprocess", "--task", dr, "--input", drTestdata, "--output-dir", drData); err != nil {
		t.Fatalf("preprocess dr: %v\n%s", err, stderr)
	}
	drCfg := fmt.Sprintf("task.configs.dr={corpus: %s, index: %s, retriever_bin: %s, retriever_url: 'http://%s'}",
		filepath.Join(drTestdata, "corpus.jsonl"), filepath.Join(t.TempDir(), "index"), filepath.Join(bins, "rlhost-retriever"), freeAddr(t))
	dir := filepath.Join(t.TempDir(), "run")
	steps := mixedRun{batch: 6, responseLen: 8, turns: 1, steps: 3}.train(t, dir, "--task", "gsm8k", "--task", dr, "--task", pm, drCfg,
		"data.train_files=["+filepath.Join(gsm, "train.parquet")+", "+filepath.Join(drData, "train.parquet")+", "+filepath.Join(pmData, "train.parquet")+"]",
		"data.val_files=["+filepath.Join(gsm, "test.parquet")+", "+filepath.Join(drData, "test.parquet")+", "+filepath.Join(pmData, "test.parquet")+"]",
		"data.sampling_weights={openai/gsm8k: 3, wordnet_dr_hop1: 1, wordnet_dr_hop2: 1, wordnet_dr_hop3: 1, python-math: 3}", "data.val_max_samples=3",
		"data.max_prompt_length=768", "actor_rollout_ref.rollout.max_num_seqs=12", "trainer.test_freq=3")
	tasks := []string{"gsm8k", "dr", "python-math"}
	total := map[string]float64{}
	for _, s := range steps {
		t.Logf("step %d: %.1f s (rollout %.1f s, update %.1f s), gsm8k %v dr %v python-math %v trajectories", s.Step, s.Values["timing_s/step"],
			s.Values["timing_s/gen"], s.Values["timing_s/update_actor"], s.Values["task/gsm8k/trajectories"], s.Values["task/dr/trajectories"],
			s.Values["task/python-math/trajectories"])
		var n float64
		for _, tn := range tasks {
			n += s.Values["task/"+tn+"/trajectories"]
			total[tn] += s.Values["task/"+tn+"/trajectories"]
			if s.Values["task/"+tn+"/trajectories"] > 0 {
				if _, ok := s.Values["task/"+tn+"/score/mean"]; !ok {
					t.Errorf("step %d lacks task/%s/score/mean", s.Step, tn)
				}
			}
		}
		if n != 12 {
			t.Errorf("step %d: %v trajectories over the three tasks, want 6 prompts x 2", s.Step, n)
		}
		if _, ok := s.Values["actor/pg_loss"]; !ok {
			t.Errorf("step %d lacks actor/pg_loss", s.Step)
		}
	}
	for _, tn := range tasks {
		if total[tn] == 0 {
			t.Errorf("no %s trajectory in 3 steps of 6 prompts at weights 1:1:1 per task (%v)", tn, total)
		}
	}
	last := steps[2].Values
	for _, k := range []string{"val-core/openai/gsm8k/reward/mean@1", "val-core/python-math/reward/mean@1",
		"val-core/task:gsm8k/reward/mean@1", "val-core/task:dr/reward/mean@1", "val-core/task:python-math/reward/mean@1"} {
		if _, ok := last[k]; !ok {
			t.Errorf("step 3 lacks %s", k)
		}
	}
	seen := map[string]string{} // task -> data_source of its traces
	for _, tr := range traceSources(t, dir) {
		want := map[string]string{"gsm8k": "openai/gsm8k", "dr": "wordnet_dr_hop", "python-math": "python-math"}[tr.task]
		if want == "" || !strings.HasPrefix(tr.dataSource, want) {
			t.Errorf("a trace of task %q has data_source %q", tr.task, tr.dataSource)
		}
		seen[tr.task] = tr.dataSource
	}
	if len(seen) != 3 {
		t.Errorf("traces of %d tasks, want gsm8k, dr and python-math: %v", len(seen), seen)
	}
}
