package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/plugins/local"
)

// viewerDeps returns NODE_PATH for the headless-Chromium viewer tests: they need
// /usr/bin/chromium, node and playwright-core (make tracing-deps). Without them the test is
// skipped, unless RLHOST_VIEWER_E2E=1 (as `make test-tracing` sets), when it fails.
func viewerDeps(t *testing.T) string {
	t.Helper()
	nodePath := os.Getenv("RLHOST_PLAYWRIGHT_NODE_PATH")
	if nodePath == "" {
		home, _ := os.UserHomeDir()
		nodePath = filepath.Join(home, ".cache", "rlhost", "tracing-node", "node_modules")
	}
	var missing []string
	for _, p := range []string{"/usr/bin/chromium", filepath.Join(nodePath, "playwright-core")} {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if _, err := exec.LookPath("node"); err != nil {
		missing = append(missing, "node")
	}
	if len(missing) > 0 {
		if os.Getenv("RLHOST_VIEWER_E2E") == "1" {
			t.Fatalf("the viewer test needs %v (make tracing-deps installs them)", missing)
		}
		t.Skipf("the viewer test needs %v (make tracing-deps)", missing)
	}
	return nodePath
}

// serveAndBrowse serves st with `rlhost traces serve` and runs a browser script on it; it
// decodes the JSON the script prints into seen.
func serveAndBrowse(t *testing.T, st, other *local.Store, nodePath, script, shots string, seen any) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw, _ := os.Pipe()
	served := make(chan error, 1)
	go func() { served <- tracesServe(ctx, pw, st, other, "127.0.0.1:0"); pw.Close() }()
	var line [256]byte
	n, _ := pr.Read(line[:])
	url := ""
	if i := strings.Index(string(line[:n]), "http://"); i >= 0 {
		url = strings.Fields(string(line[i:n]))[0]
	}
	if url == "" {
		t.Fatalf("serve printed %q", line[:n])
	}
	os.MkdirAll(shots, 0o755)
	cmd := exec.Command("node", script, url, shots)
	cmd.Env = append(os.Environ(), "NODE_PATH="+nodePath)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("browser: %v\n%s", err, stderr.String())
	}
	t.Logf("browser saw: %s", out)
	if err := json.Unmarshal(out, seen); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("serve: %v", err)
	}
}

// trainingRunShape is the run TestTracesViewerOnTrainingRun makes: the arith example task
// (examples/arith), 2 training rows, 2 per batch (a step is an epoch), 4 rollouts each at
// temperature 0.7 (about a third right: groups of mixed rewards), 2 steps, greedy
// validation of 2 test rows before training and after each step.
const (
	runRows, runN, runSteps = 2, 4, 2
)

var buildArith sync.Once

// arithData builds the arith example plugin and makes its dataset (runRows training and test
// rows) once: both runs train on the same rows (gendata deals its one random stream to the
// splits in map order, so two calls can swap them).
func arithData(t *testing.T) string {
	t.Helper()
	buildArith.Do(func() {
		cmd := exec.Command("go", "build", "-o", filepath.Join(pluginDir, "rlhost-task-arith"), ".")
		cmd.Dir = filepath.Join("..", "..", "examples", "arith")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("building the arith example plugin: %v\n%s", err, out)
		}
	})
	raw, data := t.TempDir(), filepath.Join(t.TempDir(), "data")
	cmd := exec.Command("go", "run", "./gendata", "-out", raw, "-train", fmt.Sprint(runRows), "-test", fmt.Sprint(runRows))
	cmd.Dir = filepath.Join("..", "..", "examples", "arith")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("arith gendata: %v\n%s", err, out)
	}
	if _, stderr, err := run(t, "preprocess", "--task", "arith", "--input", raw, "--output-dir", data); err != nil {
		t.Fatalf("preprocess: %v\n%s", err, stderr)
	}
	return data
}

// trainTinyArith trains the default model on the arith rows in data into runDir.
func trainTinyArith(t *testing.T, data, runDir string, extra ...string) {
	t.Helper()
	args := append([]string{"train", "--task", "arith",
		"data.train_files=" + filepath.Join(data, "train.parquet"), "data.val_files=" + filepath.Join(data, "test.parquet"),
		fmt.Sprint("data.train_batch_size=", runRows), fmt.Sprint("actor_rollout_ref.rollout.n=", runN), "data.max_response_length=32",
		"actor_rollout_ref.rollout.temperature=0.7", "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=2",
		"actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=8",
		"actor_rollout_ref.rollout.max_num_seqs=8", "actor_rollout_ref.model.path=" + repoModel(t),
		fmt.Sprint("trainer.total_epochs=", runSteps), fmt.Sprint("trainer.total_training_steps=", runSteps),
		"trainer.test_freq=1", "trainer.val_before_train=true", "trainer.seed=7", "trainer.logger=[jsonl]",
		"algorithm.adv_estimator=grpo", "algorithm.norm_adv_by_std_in_grpo=true", "trainer.run_dir=" + runDir}, extra...)
	t0 := time.Now()
	if _, stderr, err := run(t, args...); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	t.Logf("rlhost train %s in %s", filepath.Base(runDir), time.Since(t0).Round(time.Second))
}

// storedTurns reads the generate spans of a store, by trace id in start order: each turn's
// response text ("response", stored with token2text) and token ids ("response_ids", always
// stored). A span without ids fails the test.
func storedTurns(t *testing.T, st *local.Store) (texts map[string][]string, ids map[string][][]int) {
	t.Helper()
	texts, ids = map[string][]string{}, map[string][][]int{}
	rows, err := st.DB().Query(`SELECT trace_id, outputs FROM spans WHERE name = 'generate' ORDER BY trace_id, start_ns, rowid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, out string
		if err := rows.Scan(&id, &out); err != nil {
			t.Fatal(err)
		}
		var o struct {
			Response *string `json:"response"`
			IDs      []int   `json:"response_ids"`
		}
		if err := json.Unmarshal([]byte(out), &o); err != nil {
			t.Fatalf("generate span of %s: outputs %q: %v", id, out, err)
		}
		if o.IDs == nil {
			t.Fatalf("generate span of %s: outputs %q: no response_ids", id, out)
		}
		ids[id] = append(ids[id], o.IDs)
		if o.Response != nil {
			texts[id] = append(texts[id], *o.Response)
		}
	}
	return texts, ids
}

// key names a trajectory independently of its trace id: the same rollout in two runs.
func key(t local.Trajectory) string {
	return fmt.Sprintf("step %d sample %d rollout %d validate %v", t.Step, t.SampleIndex, t.RolloutN, t.Validate)
}

// TestTracesViewerOnTrainingRun trains the arith example twice with the same seed: run A with the default
// token2text (text beside the token ids in the local store), run B with token2text=false (token
// ids alone; both runs store the same ids). The viewer,
// serving run B with the run's own tokenizer, is driven in headless Chromium
// (plugins/local/viewer/testdata/browser_run_test.cjs) and must show the text run A stored
// for the same rollouts; it must offer "compare epochs" and "group" on training rows,
// "compare steps" and no group on validation rows (n = 1), and show each group's rewards and
// the advantages the update used (checked against GRPO's formula from the rewards).
// `rlhost traces compare A B` pairs the two runs' validation. Screenshots go to
// RLHOST_VIEWER_SCREENSHOTS (default: a temporary directory).
func TestTracesViewerOnTrainingRun(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model twice")
	}
	nodePath := viewerDeps(t)
	model := repoModel(t)
	runA, runB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	data := arithData(t)
	trainTinyArith(t, data, runA)
	trainTinyArith(t, data, runB, "actor_rollout_ref.rollout.trace.token2text=false")
	ctx := context.Background()
	stA, err := local.OpenRun(runA)
	if err != nil {
		t.Fatal(err)
	}
	defer stA.Close()
	stB, err := local.OpenRun(runB)
	if err != nil {
		t.Fatal(err)
	}
	defer stB.Close()

	// Both runs stored the token ids of every generate span, run A the text beside them.
	textsA, idsA := storedTurns(t, stA)
	textsB, idsB := storedTurns(t, stB)
	if len(idsA) == 0 || len(textsA) != len(idsA) || len(textsB) != 0 || len(idsB) == 0 {
		t.Fatalf("trajectories' generate spans: run A %d with text, %d with ids; run B %d with text, %d with ids", len(textsA), len(idsA), len(textsB), len(idsB))
	}
	for _, x := range []struct {
		name string
		st   *local.Store
	}{{"A (text)", stA}, {"B (ids)", stB}} {
		var payload, n float64
		x.st.DB().QueryRow(`SELECT sum(length(inputs) + length(outputs) + length(attributes)) FROM spans`).Scan(&payload)
		x.st.DB().QueryRow(`SELECT count(*) FROM trajectories`).Scan(&n)
		t.Logf("run %s: %.0f bytes of span payload per trajectory", x.name, payload/n)
	}
	listA, _ := stA.List(ctx, local.Filter{Limit: 1000})
	listB, _ := stB.List(ctx, local.Filter{Limit: 1000})
	wantTraj := runSteps*runRows*runN + (runSteps+1)*runRows
	if len(listA) != wantTraj || len(listB) != wantTraj {
		t.Fatalf("trajectories: %d in A, %d in B; want %d (%d steps of %dx%d, %d validations of %d)", len(listA), len(listB), wantTraj,
			runSteps, runRows, runN, runSteps+1, runRows)
	}
	// Same seed, same rollouts: A's text is what B's ids decode to, turn by turn. textOfA is
	// a trajectory's turns joined, as the viewer shows a response.
	tk, err := tokenizer.Load(model)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	turnsOfA, textOfA, idsOfA := map[string][]string{}, map[string]string{}, map[string][][]int{}
	byKeyB := map[string]local.Trajectory{}
	for _, tr := range listA {
		turnsOfA[key(tr)] = textsA[tr.TraceID]
		textOfA[key(tr)] = strings.Join(textsA[tr.TraceID], "\n")
		idsOfA[key(tr)] = idsA[tr.TraceID]
	}
	for _, tr := range listB {
		byKeyB[key(tr)] = tr
		var got []string
		for _, ids := range idsB[tr.TraceID] {
			got = append(got, tk.Decode(ids, false))
		}
		if want := turnsOfA[key(tr)]; fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
			t.Errorf("%s: run B's ids decode to %q; run A stored %q (the two runs differ: is training deterministic?)", key(tr), got, want)
		}
		if fmt.Sprint(idsB[tr.TraceID]) != fmt.Sprint(idsOfA[key(tr)]) {
			t.Errorf("%s: run B's ids %v; run A stored %v beside its text", key(tr), idsB[tr.TraceID], idsOfA[key(tr)])
		}
	}

	// Advantages: GRPO's (r - mean) / (std + 1e-6) over each group of n, std the sample std.
	groups := map[string][]local.Trajectory{}
	for _, tr := range listB {
		if tr.Validate {
			if tr.Advantage != nil {
				t.Errorf("%s: validation trajectory has advantage %v", key(tr), *tr.Advantage)
			}
			continue
		}
		g := fmt.Sprintf("%d/%d", tr.Step, tr.SampleIndex)
		groups[g] = append(groups[g], tr)
	}
	wantAdv := map[string]float64{}
	mixed := 0
	for g, members := range groups {
		if len(members) != runN {
			t.Fatalf("group %s has %d members; want %d", g, len(members), runN)
		}
		var mean, ss float64
		for _, m := range members {
			mean += m.Reward / runN
		}
		for _, m := range members {
			ss += (m.Reward - mean) * (m.Reward - mean)
		}
		std := math.Sqrt(ss / (runN - 1))
		if ss > 0 {
			mixed++
		}
		for _, m := range members {
			want := (m.Reward - mean) / (std + 1e-6)
			wantAdv[key(m)] = want
			if m.Advantage == nil || math.Abs(*m.Advantage-want) > 1e-4 {
				t.Errorf("%s: reward %g in group %v: advantage %v; want %.5f", key(m), m.Reward, members, m.Advantage, want)
			}
		}
	}

	if mixed == 0 {
		t.Errorf("no group of the %d had mixed rewards: the advantages checked are all 0", len(groups))
	}

	// `traces show` of run B decodes its ids with the run's tokenizer.
	some := listB[len(listB)-1]
	out, stderr, err := run(t, "traces", "show", "--run", runB, some.TraceID[:12])
	if err != nil {
		t.Fatalf("traces show: %v\n%s", err, stderr)
	}
	if want := turnsOfA[key(some)]; len(want) == 0 || !strings.Contains(out, indent(want[len(want)-1])) {
		t.Errorf("traces show of run B (ids) does not show the decoded text %q:\n%s", want, out)
	}

	// `traces compare A B`: the two runs' validation at their last common step, paired.
	out, stderr, err = run(t, "traces", "compare", runA, runB)
	if err != nil {
		t.Fatalf("traces compare A B: %v\n%s", err, stderr)
	}
	for _, want := range []string{fmt.Sprintf("validation at step %d", runSteps), fmt.Sprintf("%d of %d pairs answered identically", runRows, runRows), "REWARD A"} {
		if !strings.Contains(out, want) {
			t.Errorf("traces compare A B lacks %q:\n%s", want, out)
		}
	}
	if _, _, err := run(t, "traces", "compare", "--step", "9", runA, runB); err == nil || !strings.Contains(err.Error(), "step 9") {
		t.Errorf("compare at a step neither run validated: %v", err)
	}

	// The viewer of run B in Chromium.
	shots := os.Getenv("RLHOST_VIEWER_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	setRunDecoder(ctx, stB, "", os.Stderr)
	type card struct {
		Heading, Text string
		Reward        float64
		Del, Ins      []string
	}
	type compareView struct {
		Title         string
		OverviewSteps []int64
		Cards         []card
	}
	var seen struct {
		Errors []string
		Rows   []struct {
			ID                    string
			Step, Sample, Rollout int64
			Validate              bool
			Reward                float64
			Advantage             string
			Links                 []string
		}
		TrainMeta  string
		TrainChat  []struct{ Role, Content string }
		TrainLinks []string
		Epochs     compareView
		Group      []struct {
			Rollout   int64
			Reward    float64
			Advantage string
			Text      string
		}
		GroupTitle    string
		TrainID       string
		ValID         string
		ValLinks      []string
		Steps         compareView
		NoCounterpart string
		Runs, Runs0   struct {
			Title, Summary string
			Cards          []card
		}
	}
	serveAndBrowse(t, stB, stA, nodePath, "../../plugins/local/viewer/testdata/browser_run_test.cjs", shots, &seen)
	if len(seen.Errors) > 0 {
		t.Errorf("page errors: %v", seen.Errors)
	}
	byID := map[string]local.Trajectory{}
	for _, tr := range listB {
		byID[tr.TraceID] = tr
	}
	if len(seen.Rows) != wantTraj {
		t.Errorf("the list shows %d trajectories; want %d", len(seen.Rows), wantTraj)
	}
	// Counterparts by the run's shape: a training row comes back at each of the 2 steps (one
	// per epoch) with a group of n; a validation row at the 3 validations, alone (n = 1).
	for _, r := range seen.Rows {
		want := []string{fmt.Sprintf("compare epochs (%d)", runSteps), fmt.Sprintf("group of %d", runN)}
		if r.Validate {
			want = []string{fmt.Sprintf("compare steps (%d)", runSteps+1)}
		}
		if fmt.Sprint(r.Links) != fmt.Sprint(want) {
			t.Errorf("row step %d sample %d rollout %d validate %v offers %q; want %q", r.Step, r.Sample, r.Rollout, r.Validate, r.Links, want)
		}
	}
	// The training trajectory's chat shows run A's text for the same rollout.
	train := byID[seen.TrainID]
	if train.TraceID == "" || train.Validate {
		t.Fatalf("the browser opened %q, not a training trajectory of the run", seen.TrainID)
	}
	var assistant []string
	for _, m := range seen.TrainChat {
		if m.Role == "assistant" {
			assistant = append(assistant, m.Content)
		}
		if strings.HasPrefix(strings.TrimSpace(m.Content), "[") && (m.Role == "user" || m.Role == "assistant") {
			t.Errorf("the chat shows token ids: %s: %.80s", m.Role, m.Content)
		}
	}
	if fmt.Sprintf("%q", assistant) != fmt.Sprintf("%q", turnsOfA[key(train)]) {
		t.Errorf("assistant turns %q; want run A's text %q", assistant, turnsOfA[key(train)])
	}
	if mixed > 0 && wantAdv[key(train)] == 0 {
		t.Errorf("the browser opened %s, whose group has no signal, though %d groups have one", key(train), mixed)
	}
	if fmt.Sprint(seen.TrainLinks) != "[to-compare to-group]" {
		t.Errorf("the training trajectory offers %v; want [to-compare to-group]", seen.TrainLinks)
	}
	wantAdvText := func(k string) string {
		a := wantAdv[k]
		s := fmt.Sprintf("%.3f", a)
		if a > 0 {
			s = "+" + s
		}
		if a == 0 {
			s = "0"
		}
		return s
	}
	if !strings.Contains(seen.TrainMeta, "advantage "+wantAdvText(key(train))) {
		t.Errorf("trajectory meta %q lacks advantage %s", seen.TrainMeta, wantAdvText(key(train)))
	}
	// Across epochs: the row's rollouts at step 1 beside step 2, texts as run A stored them,
	// rewards as recorded, and a word diff where the texts differ.
	checkCompare := func(name string, v compareView, sample int64, validate bool, steps []int64) {
		t.Helper()
		if fmt.Sprint(v.OverviewSteps) != fmt.Sprint(steps) {
			t.Errorf("%s: overview steps %v; want %v", name, v.OverviewSteps, steps)
		}
		n := runN
		if validate {
			n = 1
		}
		if len(v.Cards) != 2*n {
			t.Fatalf("%s: %d cards; want %d", name, len(v.Cards), 2*n)
		}
		for i, c := range v.Cards {
			step := steps[0]
			if i%2 == 1 {
				step = steps[len(steps)-1]
			}
			k := fmt.Sprintf("step %d sample %d rollout %d validate %v", step, sample, i/2, validate)
			want := textOfA[k]
			if strings.Join(strings.Fields(c.Text), " ") != strings.Join(strings.Fields(want), " ") {
				t.Errorf("%s card %d (%s): text %q; want %q", name, i, k, c.Text, want)
			}
			if c.Reward != byKeyB[k].Reward || !strings.HasPrefix(c.Heading, fmt.Sprintf("step %d ", step)) {
				t.Errorf("%s card %d: %q reward %v; want step %d reward %v", name, i, c.Heading, c.Reward, step, byKeyB[k].Reward)
			}
			if i%2 == 1 {
				a := v.Cards[i-1]
				same := strings.Join(strings.Fields(a.Text), " ") == strings.Join(strings.Fields(c.Text), " ")
				if marked := len(a.Del) + len(c.Ins); same != (marked == 0) || len(a.Ins) != 0 || len(c.Del) != 0 {
					t.Errorf("%s rollout %d: texts the same: %v, but %d deleted words left and %d inserted right (%d, %d misplaced)",
						name, i/2, same, len(a.Del), len(c.Ins), len(a.Ins), len(c.Del))
				}
			}
		}
	}
	if !strings.Contains(seen.Epochs.Title, "across epochs") {
		t.Errorf("compare title %q", seen.Epochs.Title)
	}
	checkCompare("epochs", seen.Epochs, train.SampleIndex, false, []int64{1, 2})
	diffs := 0
	for _, c := range seen.Epochs.Cards {
		diffs += len(c.Del) + len(c.Ins)
	}
	if diffs == 0 {
		t.Error("no word of the training row's rollouts changed between epochs (sampled at temperature 1)")
	}
	// The validation sample across the 3 validations (greedy, one rollout).
	val := byID[seen.ValID]
	if fmt.Sprint(seen.ValLinks) != "[to-compare]" {
		t.Errorf("the validation trajectory offers %v; want [to-compare] (no group: n = 1)", seen.ValLinks)
	}
	checkCompare("steps", seen.Steps, val.SampleIndex, true, []int64{0, 1, 2})
	// The GRPO group: n rollouts side by side with rewards and advantages.
	if len(seen.Group) != runN {
		t.Fatalf("group shows %d rollouts; want %d", len(seen.Group), runN)
	}
	for i, g := range seen.Group {
		k := fmt.Sprintf("step %d sample %d rollout %d validate false", train.Step, train.SampleIndex, i)
		if g.Rollout != int64(i) || g.Reward != byKeyB[k].Reward || g.Advantage != wantAdvText(k) ||
			strings.Join(strings.Fields(g.Text), " ") != strings.Join(strings.Fields(textOfA[k]), " ") {
			t.Errorf("group card %d: %+v; want reward %v advantage %s text %q", i, g, byKeyB[k].Reward, wantAdvText(k), textOfA[k])
		}
	}
	if !strings.Contains(seen.GroupTitle, fmt.Sprintf("Sample %d at step %d", train.SampleIndex, train.Step)) {
		t.Errorf("group title %q", seen.GroupTitle)
	}
	var valSamples []int64 // the validation rows' sample indexes, in order
	for _, tr := range listB {
		if tr.Validate && tr.Step == 0 {
			valSamples = append(valSamples, tr.SampleIndex)
		}
	}
	sort.Slice(valSamples, func(i, j int) bool { return valSamples[i] < valSamples[j] })
	// Serving B against A: both runs' validation paired, at the last common step and at step 0;
	// the same seed gave the same answers, shown decoded on B's side.
	for _, v := range []struct {
		name string
		step int64
		view struct {
			Title, Summary string
			Cards          []card
		}
	}{{"runs", runSteps, seen.Runs}, {"runs at step 0", 0, seen.Runs0}} {
		if !strings.Contains(v.view.Title, fmt.Sprintf("Validation at step %d", v.step)) ||
			!strings.Contains(v.view.Summary, fmt.Sprintf("%d of %d answered identically", runRows, runRows)) || len(v.view.Cards) != 2*runRows {
			t.Errorf("%s: title %q, summary %q, %d cards", v.name, v.view.Title, v.view.Summary, len(v.view.Cards))
			continue
		}
		for i, c := range v.view.Cards {
			k := fmt.Sprintf("step %d sample %d rollout 0 validate true", v.step, valSamples[i/2])
			label := "run A "
			if i%2 == 1 {
				label = "run B "
			}
			if !strings.HasPrefix(c.Heading, label) || c.Reward != byKeyB[k].Reward || c.Text != textOfA[k] || len(c.Del)+len(c.Ins) != 0 {
				t.Errorf("%s card %d: %+v; want %s, reward %v, text %q, no diff", v.name, i, c, label, byKeyB[k].Reward, textOfA[k])
			}
		}
	}
	if !strings.Contains(seen.NoCounterpart, "not traced") {
		t.Errorf("compare of an untraced sample: %q", seen.NoCounterpart)
	}
	for _, f := range []string{"run-list.png", "run-trajectory.png", "run-compare-epochs.png", "run-group.png", "run-compare-steps.png", "run-runs.png"} {
		if st, err := os.Stat(filepath.Join(shots, f)); err != nil || st.Size() < 1000 {
			t.Errorf("screenshot %s: %v", f, err)
		}
	}
}
