package trainer

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/host/data"
	"github.com/rlhost/rlhost/host/metrics"
	"github.com/rlhost/rlhost/sdk/task"
)

// A training step whose scores come from the judge: reward_model.judge.backend=policy starts
// the Host service before the plugins, serves the policy being trained as the judge (a chat
// server session per call), and the Python plugin of examples/python-math/testdata/judge
// scores every trajectory with Host.judge (component "judge"). No item fails: without the
// judge each would be an error.
func TestTrainWithPolicyJudge(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
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
	mpath := modelPath(t)
	plugin, _ := filepath.Abs(filepath.Join("..", "..", "examples", "python-math", "testdata", "judge", "rlhost-task-pyjudge"))
	var rows []data.Row
	for i, q := range [][2]string{{"What is 2+3?", "5"}, {"Name the capital of France.", "Paris"}} {
		rows = append(rows, data.Row{DataSource: "pyjudge", AgentName: "single_turn_agent",
			Prompt:      []data.Message{{Role: "user", Content: q[0]}},
			RewardModel: data.RewardModel{Style: "model", GroundTruth: q[1]},
			ExtraInfo:   map[string]any{"index": int64(i), "split": "train", "question": q[0]}})
	}
	pq := filepath.Join(t.TempDir(), "train.parquet")
	if err := data.WriteParquet(pq, rows); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "run")
	tr := startTrainer(t, []string{"task.name=" + plugin, "data.train_files=" + pq, "data.val_files=" + pq,
		"trainer.val_before_train=false", "trainer.test_freq=-1", "data.train_batch_size=2", "actor_rollout_ref.rollout.n=2",
		"data.max_prompt_length=128", "data.max_response_length=8", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
		"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "actor_rollout_ref.rollout.max_num_seqs=4",
		"actor_rollout_ref.model.path=" + mpath, "trainer.total_training_steps=1", "trainer.save_freq=-1",
		"trainer.logger=[jsonl]", "trainer.run_dir=" + dir, "reward_model.judge.backend=policy", "reward_model.judge.max_tokens=8"},
		Options{Progress: os.Stderr})
	runToEnd(t, tr)
	s := loggedSteps(t, dir, 1)[0].Values
	t.Logf("reward/judge/mean %v, critic/score/mean %v, reward/errors %v", s["reward/judge/mean"], s[metrics.ScoreMean], s["reward/errors"])
	if _, ok := s["reward/judge/mean"]; !ok || s["reward/errors"] != 0 {
		t.Errorf("step 1: reward/judge/mean logged %v, reward/errors %v: the judge did not score every trajectory", ok, s["reward/errors"])
	}
	if s[metrics.ScoreMean] != s["reward/judge/mean"] {
		t.Errorf("critic/score/mean %v differs from the judge's mean %v", s[metrics.ScoreMean], s["reward/judge/mean"])
	}
}

// reward_model.judge.backend=model: a second local model (here the default model again, from
// its own file) answers Host.Judge through its own chat server; the reply is bounded by the
// call's max_tokens and names the judge model.
func TestJudgeBackendModel(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the default model")
	}
	mpath := modelPath(t)
	cfg := loadConfig(t, []string{"reward_model.judge.backend=model", "reward_model.judge.model_path=" + mpath,
		"reward_model.judge.max_tokens=6"})
	tr := &Trainer{cfg: cfg}
	hs, err := tr.startJudgeService()
	if err != nil || hs == nil {
		t.Fatalf("startJudgeService: %v, %v", hs, err)
	}
	defer tr.judge.close()
	if err := tr.setJudge(cpu.New(), 512, io.Discard); err != nil {
		t.Fatal(err)
	}
	h, err := task.DialHost(*hs)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := h.Judge(ctx, task.JudgeRequest{Messages: []task.Message{{Role: "user", Content: "Is 2+2=4? Answer YES or NO."}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("judge reply %q (%d completion tokens, model %s)", r.Text, r.CompletionTokens, r.Model)
	if r.Text == "" || r.CompletionTokens == 0 || r.CompletionTokens > 6 || r.Model != "judge" {
		t.Errorf("judge reply %+v: want 1..6 tokens of text from model judge", r)
	}
}
