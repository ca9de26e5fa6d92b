package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/host/metrics"
)

func repoModel(t *testing.T) string {
	p := os.Getenv("RLHOST_MODEL")
	if p == "" {
		p, _ = filepath.Abs(filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the default model is missing at %s (make model)", p)
		}
		t.Skipf("the default model is missing at %s: run `make model`", p)
	}
	return p
}

// tinyRun is a real GRPO run on GSM8K made as small as it can be: 2 prompts x 2 rollouts,
// 24 response tokens, 2 validation prompts.
func tinyRun(t *testing.T, runDir string, extra ...string) []string {
	in := filepath.Join("..", "..", "..", "shared", "data", "gsm8k")
	data := filepath.Join(t.TempDir(), "data")
	if _, err := os.Stat(filepath.Join(in, "test.jsonl")); err != nil {
		t.Skipf("GSM8K not found at %s", in)
	}
	if _, _, err := run(t, "preprocess", "--task", "gsm8k", "--input", in, "--output-dir", data); err != nil {
		t.Fatal(err)
	}
	return append([]string{"train", "--task", "gsm8k",
		"data.train_files=" + filepath.Join(data, "test.parquet"), "data.val_files=" + filepath.Join(data, "test.parquet"),
		"data.train_batch_size=2", "actor_rollout_ref.rollout.n=2", "data.max_response_length=24",
		"data.val_max_samples=2", "actor_rollout_ref.actor.ppo_mini_batch_size=2",
		"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", "actor_rollout_ref.rollout.max_num_seqs=4",
		"actor_rollout_ref.model.path=" + repoModel(t), "trainer.run_dir=" + runDir}, extra...)
}

func TestTrainEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	dir := filepath.Join(t.TempDir(), "run")
	args := tinyRun(t, dir, "trainer.total_training_steps=1", "trainer.save_freq=1", "trainer.test_freq=1")
	_, stderr, err := run(t, args...)
	if err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	steps, err := metrics.ReadJSONL(filepath.Join(dir, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(steps) != 2 || steps[0].Step != 0 || steps[1].Step != 1 {
		t.Fatalf("metrics steps %+v", steps)
	}
	s := steps[1].Values
	for _, k := range []string{"critic/score/mean", "actor/pg_loss", "actor/entropy", "response_length/mean",
		"perf/throughput", "timing_s/gen", "timing_s/update_actor", "val-core/openai/gsm8k/reward/mean@1", "num_turns/mean"} {
		if _, ok := s[k]; !ok {
			t.Errorf("step 1 lacks metric %s", k)
		}
	}
	if s["actor/entropy"] <= 0 {
		t.Errorf("entropy %v", s["actor/entropy"])
	}
	if s["tracing/exported"] <= 0 || s["tracing/dropped"] != 0 {
		t.Errorf("tracing metrics: exported %v dropped %v", s["tracing/exported"], s["tracing/dropped"])
	}
	// Every trajectory is traced by default: 2 validation rollouts before training, 2x2
	// training rollouts and 2 validation rollouts at step 1.
	stdout, _, err := run(t, "traces", "list", "--run", dir)
	if lines := strings.Split(strings.TrimSpace(stdout), "\n"); err != nil || len(lines) != 1+2+4+2 {
		t.Errorf("rlhost traces list: %v, %d lines\n%s", err, len(lines), stdout)
	}
	for _, f := range []string{"config.yaml", "curves.png", "checkpoints/global_step_1/actor/model.safetensors",
		"checkpoints/global_step_1/optimizer.bin", "checkpoints/global_step_1/state.json"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("run directory lacks %s", f)
		}
	}
	if !strings.Contains(stderr, "step 1 |") {
		t.Errorf("no step summary on the console:\n%s", stderr)
	}
	// GSM8K's rows run the tool agent with the calc_gsm8k_reward tool, and SmolLM2's template
	// has no tools section: one warning for the run, not one per prompt.
	if n := strings.Count(stderr, "has no tools section"); n != 1 || !strings.Contains(stderr, "calc_gsm8k_reward") {
		t.Errorf("%d dropped-tools warnings, want 1:\n%s", n, stderr)
	}
	if !strings.Contains(stderr, "model llama: ") {
		t.Errorf("the console does not name the model's family:\n%s", stderr)
	}
	// Bad configuration is refused before anything runs.
	_, _, err = run(t, "train", "--task", "gsm8k", "data.train_batch_szie=2")
	if err == nil || !strings.Contains(err.Error(), "data.train_batch_size") {
		t.Errorf("misspelt key: %v", err)
	}
}

// A run killed with SIGKILL after its first checkpoint resumes from it, and with a fixed seed
// its second step matches the second step of a run that was never interrupted.
func TestTrainKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	bin := filepath.Join(t.TempDir(), "rlhost")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	full := filepath.Join(t.TempDir(), "full")
	if _, stderr, err := run(t, tinyRun(t, full, "trainer.total_training_steps=2", "trainer.val_before_train=false")...); err != nil {
		t.Fatalf("uninterrupted run: %v\n%s", err, stderr)
	}
	// The interrupted run: kill -9 as soon as the step-1 checkpoint exists.
	cut := filepath.Join(t.TempDir(), "cut")
	args := tinyRun(t, cut, "trainer.total_training_steps=2", "trainer.val_before_train=false", "trainer.save_freq=1")
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "RLHOST_PLUGIN_PATH="+pluginDir)
	var out strings.Builder
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	ck := filepath.Join(cut, "checkpoints", "global_step_1", "state.json")
	killed := false
	for !killed {
		select {
		case err := <-done:
			t.Fatalf("the run ended before it could be killed (%v):\n%s", err, out.String())
		default:
		}
		if _, err := os.Stat(ck); err == nil {
			cmd.Process.Kill()
			<-done
			killed = true
		} else {
			waitBriefly()
		}
	}
	_, stderr, err := run(t, args...)
	if err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "resumed from") {
		t.Fatalf("the second run did not resume:\n%s", stderr)
	}
	a, _ := metrics.ReadJSONL(filepath.Join(full, "metrics.jsonl"))
	b, _ := metrics.ReadJSONL(filepath.Join(cut, "metrics.jsonl"))
	if len(a) != 2 || len(b) != 2 {
		t.Fatalf("steps logged: uninterrupted %d, resumed %d", len(a), len(b))
	}
	for _, k := range []string{"critic/score/mean", "actor/pg_loss", "actor/entropy", "response_length/mean", "actor/grad_norm"} {
		x, y := a[1].Values[k], b[1].Values[k]
		if diff := x - y; diff > 1e-4*max(1, abs(x)) || -diff > 1e-4*max(1, abs(x)) {
			t.Errorf("step 2 %s: uninterrupted %v, resumed %v", k, x, y)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// A task plugin that crashes on every 13th Start or Obs call: the run completes, the affected
// trajectories are retried (then dropped if they fail again) and counted, no step is lost.
func TestTrainSurvivesPluginCrashes(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	crashy := filepath.Join(t.TempDir(), "rlhost-task-gsm8k")
	if out, err := exec.Command("go", "build", "-o", crashy, "-ldflags", "-X main.every=13", "../../host/trainer/testdata/crashy").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dir := filepath.Join(t.TempDir(), "run")
	args := tinyRun(t, dir, "trainer.total_training_steps=2", "trainer.val_before_train=false", "data.train_batch_size=4",
		"actor_rollout_ref.actor.ppo_mini_batch_size=4")
	args[2] = crashy // --task takes a path
	_, stderr, err := run(t, args...)
	if err != nil {
		t.Fatalf("train with a crashing plugin: %v\n%s", err, stderr)
	}
	steps, err := metrics.ReadJSONL(filepath.Join(dir, "metrics.jsonl"))
	if err != nil || len(steps) != 2 {
		t.Fatalf("steps %d, %v", len(steps), err)
	}
	retried := steps[0].Values["rollout/retried"] + steps[1].Values["rollout/retried"]
	if retried < 1 {
		t.Fatalf("no trajectory was retried, though the plugin crashed on every 13th call: %v", steps[0].Values)
	}
	t.Logf("retried %v, dropped %v", retried, steps[0].Values["rollout/dropped"]+steps[1].Values["rollout/dropped"])
}

func TestGenerateCommand(t *testing.T) {
	stdout, _, err := run(t, "generate", "--model", repoModel(t), "--chat", "--prompt", "What is the capital of France?",
		"--max-tokens", "12", "--logprobs")
	if err != nil {
		t.Fatal(err)
	}
	var out struct {
		TokenIDs []int     `json:"token_ids"`
		Text     string    `json:"text"`
		Logprobs []float32 `json:"logprobs"`
	}
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if len(out.TokenIDs) == 0 || len(out.Logprobs) != len(out.TokenIDs) || !strings.Contains(out.Text, "Paris") {
		t.Fatalf("generate: %+v", out)
	}
}

// LoRA: adapters trained on a frozen base, the base as the reference policy (KL loss on),
// adapters checkpointed in peft's layout and resumed.
func TestTrainLoRA(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	dir := filepath.Join(t.TempDir(), "run")
	lora := []string{"actor_rollout_ref.model.lora_rank=8", "actor_rollout_ref.model.lora_alpha=16",
		"actor_rollout_ref.actor.use_kl_loss=true", "trainer.val_before_train=false", "trainer.save_freq=1"}
	if _, stderr, err := run(t, tinyRun(t, dir, append(lora, "trainer.total_training_steps=1")...)...); err != nil {
		t.Fatalf("train with LoRA: %v\n%s", err, stderr)
	}
	for _, f := range []string{"actor_lora/adapter_config.json", "actor_lora/adapter_model.safetensors", "actor/model.safetensors"} {
		if _, err := os.Stat(filepath.Join(dir, "checkpoints", "global_step_1", f)); err != nil {
			t.Errorf("checkpoint lacks %s", f)
		}
	}
	_, stderr, err := run(t, tinyRun(t, dir, append(lora, "trainer.total_training_steps=2")...)...)
	if err != nil || !strings.Contains(stderr, "resumed from") {
		t.Fatalf("resume with LoRA: %v\n%s", err, stderr)
	}
	steps, err := metrics.ReadJSONL(filepath.Join(dir, "metrics.jsonl"))
	if err != nil || len(steps) != 2 {
		t.Fatalf("steps %d, %v", len(steps), err)
	}
	if _, ok := steps[1].Values["actor/kl_loss"]; !ok {
		t.Errorf("no actor/kl_loss with use_kl_loss: %v", steps[1].Values)
	}
}
