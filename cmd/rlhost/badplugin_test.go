package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlhost/rlhost/host/data"
	"github.com/rlhost/rlhost/host/metrics"
)

// The runs below train the tiny Llama of host/sft/testdata/tiny-chat (two layers, 258 tokens,
// every id made an eos) with host/trainer/testdata/badtask, a task plugin that misbehaves as its name says, for a
// few steps of 2 prompts x 2 rollouts with one-second deadlines. Each checks that the run
// ends with an error (the CLI exits 1) whose one line names the fault, and that no plugin
// process is left.

var (
	badtaskOnce sync.Once
	badtaskBin  string
	badtaskErr  error
)

// badtask returns the path of host/trainer/testdata/badtask copied as rlhost-task-MODE into a
// folder of its own.
func badtask(t *testing.T, mode string) string {
	t.Helper()
	badtaskOnce.Do(func() {
		badtaskBin = filepath.Join(pluginDir, "badtask.bin")
		if out, err := exec.Command("go", "build", "-o", badtaskBin, "../../host/trainer/testdata/badtask").CombinedOutput(); err != nil {
			badtaskErr = err
			t.Logf("%s", out)
		}
	})
	if badtaskErr != nil {
		t.Fatalf("building badtask: %v", badtaskErr)
	}
	b, err := os.ReadFile(badtaskBin)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "rlhost-task-"+mode)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// badRun trains with the plugin of mode and returns the run's stderr and error, after
// checking that no process of the plugin is left.
func badRun(t *testing.T, mode string, extra ...string) (string, error) {
	t.Helper()
	bin := badtask(t, mode)
	var rows []data.Row
	for i, q := range []string{"Say hi.", "Say bye."} {
		rows = append(rows, data.Row{DataSource: "badtask", AgentName: "tool_agent", Ability: "chat",
			Prompt:      []data.Message{{Role: "user", Content: q}},
			RewardModel: data.RewardModel{Style: "rule", GroundTruth: "hi"},
			ExtraInfo:   map[string]any{"index": int64(i), "split": "train"}})
	}
	pq := filepath.Join(t.TempDir(), "train.parquet")
	if err := data.WriteParquet(pq, rows); err != nil {
		t.Fatal(err)
	}
	// Every id is an eos: each assistant turn is one token, so that the turn ends before the
	// response budget and the user simulator (Obs) answers it.
	ids := make([]string, 258)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
	}
	model := tinyChatWith(t, "["+strings.Join(ids, ",")+"]", "")
	args := append([]string{"train", "--task", bin, "task.config.interaction=true",
		"data.train_files=" + pq, "data.val_files=" + pq, "trainer.val_before_train=false", "trainer.test_freq=-1",
		"data.train_batch_size=2", "actor_rollout_ref.rollout.n=2", "data.max_prompt_length=64", "data.max_response_length=8",
		"actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
		"actor_rollout_ref.rollout.max_num_seqs=4", "actor_rollout_ref.model.path=" + model,
		"trainer.logger=[console,jsonl]",
		"task.timeouts.start=1", "task.timeouts.obs=1", "task.timeouts.end=1", "task.timeouts.score=1",
		"trainer.total_training_steps=2", "trainer.max_consecutive_failed_steps=2",
		"trainer.run_dir=" + filepath.Join(t.TempDir(), "run")}, extra...)
	_, stderr, err := run(t, args...)
	if pids := processesOf(bin); len(pids) > 0 {
		t.Errorf("plugin processes left after the run: %v", pids)
	}
	return stderr, err
}

// processesOf lists the processes running the executable at path, waiting up to 5 s for them
// to go.
func processesOf(path string) []int {
	var pids []int
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		pids = pids[:0]
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && strings.TrimSuffix(exe, " (deleted)") == path {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 || time.Now().After(deadline) {
			return pids
		}
	}
}

// wantFailure checks that a run failed with one line holding every part of want.
func wantFailure(t *testing.T, stderr string, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the run succeeded; want it to fail. stderr:\n%s", stderr)
	}
	msg := err.Error()
	t.Logf("the run's error: %s", msg)
	if strings.Contains(msg, "\n") {
		t.Errorf("the run's error is not one line:\n%s", msg)
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("the run's error lacks %q:\n%s", w, msg)
		}
	}
}

// The control: the fixture in its good mode trains both steps and exits 0.
func TestBadPluginControl(t *testing.T) {
	stderr, err := badRun(t, "good")
	if err != nil {
		t.Fatalf("the good fixture's run failed: %v\n%s", err, stderr)
	}
}

// A plugin that hangs in Obs, in Start or in Score: each call is cancelled at its deadline, the
// trajectories (or rewards) fail, and two such steps in a row end the run naming the plugin,
// the call, the trajectory and the time.
func TestBadPluginHangs(t *testing.T) {
	for _, c := range []struct{ mode, call string }{
		{"hangobs", "Obs of trajectory s"},
		{"hangstart", "Start of trajectory s"},
		{"hangscore", "Score of 4 items"},
	} {
		t.Run(c.mode, func(t *testing.T) {
			stderr, err := badRun(t, c.mode)
			call := c.call[:strings.IndexByte(c.call, ' ')]
			wantFailure(t, stderr, err, "step 2: 2 steps in a row were not trained on (trainer.max_consecutive_failed_steps=2;",
				"plugin rlhost-task-"+c.mode+": "+c.call, "got no answer within 1s (task.timeouts."+strings.ToLower(call)+")",
				"the plugin still answers health checks")
			// The elapsed time is rounded to the millisecond: 1s, 1.004s, never under the limit.
			if !regexp.MustCompile(`cancelled after 1(\.\d{1,3})?s`).MatchString(err.Error()) {
				t.Errorf("the run's error does not give the elapsed time (1s or a little more): %v", err)
			}
			if !strings.Contains(stderr, "step 1: not trained on") {
				t.Errorf("no warning for the skipped step 1:\n%s", stderr)
			}
		})
	}
}

// A Go plugin's panic reaches the run as the panic's message and the plugin's frames.
func TestBadPluginPanics(t *testing.T) {
	stderr, err := badRun(t, "panic")
	wantFailure(t, stderr, err, "in step 1, 4 of 4 rewards failed; the first error: reward: Score failed twice: plugin rlhost-task-panic: Score of 4 items: Score: panic: runtime error: index out of range [4] with length 4",
		"(at main.grade main.go:", "<- main.(*badtask).Score main.go:")
}

// A plugin that exits right after its handshake line: the run cannot start it and says so.
func TestBadPluginExitsAfterHandshake(t *testing.T) {
	stderr, err := badRun(t, "exitearly")
	wantFailure(t, stderr, err, "plugin rlhost-task-exitearly", "exit")
}

// A plugin whose process exits in every Start from step 2 on: step 1 trains, step 2's two
// trajectories fail after a restart and a retry, and the run stops.
func TestBadPluginExitsMidRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	stderr, err := badRun(t, "exitmidrun", "trainer.total_training_steps=3", "trainer.max_consecutive_failed_steps=1", "trainer.run_dir="+dir,
		"data.train_batch_size=1", "actor_rollout_ref.actor.ppo_mini_batch_size=1")
	wantFailure(t, stderr, err, "step 2 was not trained on (trainer.max_consecutive_failed_steps=1", "in step 2, 2 of 2 trajectories failed",
		"plugin rlhost-task-exitmidrun exited during Start of trajectory s2-",
		"(exit status 3)", "exiting on purpose")
	steps, rerr := metrics.ReadJSONL(filepath.Join(dir, "metrics.jsonl"))
	if rerr != nil || len(steps) != 2 || steps[0].Values["training/skipped_step"] != 0 || steps[1].Values["training/skipped_step"] != 1 {
		t.Fatalf("metrics: %v; want step 1 trained and step 2 skipped", rerr)
	}
	if _, ok := steps[0].Values["actor/pg_loss"]; !ok {
		t.Errorf("step 1 was not trained on: %v", steps[0].Values)
	}
}

// A Score that returns fewer results than items.
func TestBadPluginWrongRewardLength(t *testing.T) {
	stderr, err := badRun(t, "wronglen")
	wantFailure(t, stderr, err, "in step 1, 4 of 4 rewards failed", "plugin rlhost-task-wronglen: Score of 4 items: Score: the task returned 3 results for 4 items")
}

// A plugin that writes to stdout after its handshake: the run goes on and the host log warns
// under the plugin's name.
func TestBadPluginStdout(t *testing.T) {
	stderr, err := badRun(t, "stdout")
	if err != nil {
		t.Fatalf("the run failed: %v\n%s", err, stderr)
	}
	for _, want := range []string{"wrote to stdout after the handshake", "plugin=rlhost-task-stdout", `line="scoring 4 items"`} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// Reward components that are NaN, +Inf or -Inf fail their rewards; a run that never trains a
// step fails.
func TestBadPluginNonFiniteRewards(t *testing.T) {
	for mode, v := range map[string]string{"nan": "NaN", "posinf": "+Inf", "neginf": "-Inf"} {
		t.Run(mode, func(t *testing.T) {
			stderr, err := badRun(t, mode, "trainer.total_training_steps=1")
			wantFailure(t, stderr, err, "no step of the run was trained on (a step is not trained on when more than trainer.max_failed_fraction=0.5",
				"in step 1, 4 of 4 rewards failed", `reward: the task's reward component "acc" is `+v)
		})
	}
}

// A run whose newest checkpoint was cut short resumes from the newest intact one, saying which
// it skipped and why; when no checkpoint is intact it stops, naming them.
func TestResumeSkipsDamagedCheckpoint(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	steps := func(n int) []string {
		return []string{"trainer.run_dir=" + dir, "trainer.save_freq=1", "trainer.total_training_steps=" + strconv.Itoa(n)}
	}
	if stderr, err := badRun(t, "good", steps(2)...); err != nil {
		t.Fatalf("first run: %v\n%s", err, stderr)
	}
	model := filepath.Join(dir, "checkpoints", "global_step_2", "actor", "model.safetensors")
	st, err := os.Stat(model)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(model, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	stderr, err := badRun(t, "good", steps(3)...)
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr)
	}
	for _, want := range []string{
		fmt.Sprintf("warning: checkpoint %s is damaged: actor/model.safetensors is %d bytes, the manifest says %d: skipped",
			filepath.Join(dir, "checkpoints", "global_step_2"), st.Size()/2, st.Size()),
		"resumed from " + filepath.Join(dir, "checkpoints", "global_step_1") + " (step 1)",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the resumed run's output lacks %q:\n%s", want, stderr)
		}
	}
	logged, err := metrics.ReadJSONL(filepath.Join(dir, "metrics.jsonl"))
	if err != nil || len(logged) != 3 || logged[2].Step != 3 {
		t.Fatalf("metrics after the resume: %d steps, %v; want steps 1, 2 (again) and 3", len(logged), err)
	}
	// Every checkpoint damaged: the run stops and names them.
	for _, s := range []string{"1", "2", "3"} {
		os.WriteFile(filepath.Join(dir, "checkpoints", "global_step_"+s, "state.json"), []byte("{}"), 0o644)
	}
	_, err = badRun(t, "good", steps(4)...)
	if err == nil || !strings.Contains(err.Error(), "no intact checkpoint in "+filepath.Join(dir, "checkpoints")) ||
		!strings.Contains(err.Error(), "global_step_1 is damaged: state.json is 2 bytes") {
		t.Fatalf("every checkpoint damaged: %v", err)
	}
}

// rlhost preprocess bounds the wait for each record's answer by task.timeouts.preprocess, and
// takes no other key.
func TestPreprocessTimeout(t *testing.T) {
	in := t.TempDir()
	writeFile(t, filepath.Join(in, "train.jsonl"), `{"q": "Say hi."}`+"\n"+`{"q": "Say bye."}`+"\n")
	_, stderr, err := run(t, "preprocess", "--task", badtask(t, "good"), "--input", in, "--output-dir", t.TempDir(), "task.timeouts.preprocess=1")
	if err != nil {
		t.Fatalf("preprocess with the good plugin: %v\n%s", err, stderr)
	}
	bin := badtask(t, "hangpreprocess")
	start := time.Now()
	_, _, err = run(t, "preprocess", "--task", bin, "--input", in, "--output-dir", t.TempDir(), "task.timeouts.preprocess=1")
	if err == nil || !strings.Contains(err.Error(), "plugin rlhost-task-hangpreprocess: Preprocess: timed out: record 0 got no answer within 1s (task.timeouts.preprocess)") ||
		time.Since(start) > 20*time.Second {
		t.Fatalf("preprocess with a plugin that never answers: %v after %v", err, time.Since(start))
	}
	if pids := processesOf(bin); len(pids) > 0 {
		t.Errorf("plugin processes left: %v", pids)
	}
	_, _, err = run(t, "preprocess", "--task", bin, "--input", in, "--output-dir", t.TempDir(), "data.train_batch_size=2")
	if err == nil || !strings.Contains(err.Error(), "takes only task.timeouts.* overrides") {
		t.Fatalf("preprocess with a key it does not take: %v", err)
	}
}
