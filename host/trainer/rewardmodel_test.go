package trainer

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/safetensors"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/metrics"
)

// writeRandomRewardModel writes a small random LlamaForSequenceClassification checkpoint
// (one label) with a vocabulary of V tokens to a temporary directory, as transformers lays
// it out: config.json with id2label, model.safetensors with model.* and score.weight.
func writeRandomRewardModel(t *testing.T, V int) string {
	t.Helper()
	dir := t.TempDir()
	cfg := map[string]any{"architectures": []string{"LlamaForSequenceClassification"}, "model_type": "llama",
		"hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
		"num_key_value_heads": 1, "vocab_size": V, "max_position_embeddings": 512, "rms_norm_eps": 1e-5,
		"rope_theta": 10000.0, "hidden_act": "silu", "tie_word_embeddings": false, "pad_token_id": 0,
		"id2label": map[string]string{"0": "LABEL_0"}, "label2id": map[string]int{"LABEL_0": 0}}
	b, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	hf, err := weights.ParseConfig("config.json", b)
	if err != nil {
		t.Fatal(err)
	}
	hf.TieWordEmbeddings = true // no lm_head in a classifier
	rng := rand.New(rand.NewPCG(23, 1))
	var ts []safetensors.Tensor
	shapes := weights.ExpectedShapes(hf)
	shapes["score.weight"] = []int{1, 16}
	for name, shape := range shapes {
		n := 1
		for _, d := range shape {
			n *= d
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64() * 0.2)
			if strings.HasSuffix(name, "norm.weight") {
				x[i] = 1
			}
		}
		ts = append(ts, safetensors.Tensor{Name: name, Shape: shape, Data: x})
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, safetensors.F32, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// grpoRun is gaeRun's small gsm8k run as GRPO without a critic, for one step.
func grpoRun(t *testing.T, runDir string) []string {
	return append(gaeRun(t, runDir), "algorithm.adv_estimator=grpo", "algorithm.use_kl_in_reward=false",
		"trainer.critic_warmup=0", "trainer.total_training_steps=1", "trainer.save_freq=-1")
}

// A real GRPO step with a reward model (reward_model.reward_weight=0.5): the score that
// trains is the task's plus half the reward model's, and the reward model's metrics are
// logged. The reward model is random, so its scores are not 0 where the task's are.
func TestTrainRewardModel(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	dir := filepath.Join(t.TempDir(), "run")
	rmDir := writeRandomRewardModel(t, 49152)
	tr := startTrainer(t, append(grpoRun(t, dir), "reward_model.enable=true", "reward_model.model.path="+rmDir,
		"reward_model.reward_weight=0.5", "reward_model.micro_batch_size_per_gpu=3"), Options{Progress: os.Stderr})
	runToEnd(t, tr)
	s := loggedSteps(t, dir, 1)[0].Values
	for _, k := range []string{"reward_model/score/mean", "reward_model/score/max", "reward_model/score/min",
		"reward/reward_model/mean", "reward/task_score/mean", "timing_s/reward_model", metrics.ScoreMean} {
		if x, ok := s[k]; !ok || math.IsNaN(x) {
			t.Fatalf("metric %s = %v (logged: %v)", k, x, ok)
		}
	}
	rm, task, score := s["reward_model/score/mean"], s["reward/task_score/mean"], s[metrics.ScoreMean]
	t.Logf("reward model mean %.5f [%.5f, %.5f], task %.4f, trained score %.5f", rm, s["reward_model/score/min"], s["reward_model/score/max"], task, score)
	if math.Abs(s["reward/reward_model/mean"]-rm) > 1e-9 {
		t.Errorf("reward/reward_model/mean %v, reward_model/score/mean %v", s["reward/reward_model/mean"], rm)
	}
	if math.Abs(score-(task+0.5*rm)) > 1e-6 {
		t.Errorf("critic/score/mean %.6f, want task %.6f + 0.5 * reward model %.6f = %.6f", score, task, rm, task+0.5*rm)
	}
	if s["reward_model/score/max"] == s["reward_model/score/min"] {
		t.Errorf("every reward-model score is %v: the model did not read the sequences", rm)
	}
}

func TestRewardCombine(t *testing.T) {
	half := 0.5
	for _, c := range []struct {
		w              *float64
		task, rm, want float64
	}{{nil, 1, -0.25, -0.25}, {&half, 1, -0.25, 0.875}, {&half, 0, 2, 1}} {
		if got := (&rewardScorer{weight: c.w}).combine(c.task, c.rm); got != c.want {
			t.Errorf("combine(%v, %v) with weight %v = %v, want %v", c.task, c.rm, c.w, got, c.want)
		}
	}
}

// A reward model that cannot read the policy's tokens is refused before training.
func TestRewardModelVocabulary(t *testing.T) {
	if testing.Short() {
		t.Skip("loads the default model")
	}
	dir := filepath.Join(t.TempDir(), "run")
	small := filepath.Join("..", "..", "gpu", "model", "testdata", "reward", "tiny-llama-seq")
	tr, err := New(context.Background(), loadConfig(t, append(grpoRun(t, dir), "reward_model.enable=true", "reward_model.model.path="+small)), Options{})
	if err == nil {
		tr.Close()
		t.Fatal("a reward model with 64 tokens was accepted for a policy with 49152")
	}
	if want := "embeds 64 tokens, fewer than the policy tokenizer's 49152"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}
