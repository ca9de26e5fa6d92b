package trainer

import (
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/host/data"
)

// gaeRun builds the gsm8k task plugin and a two-row dataset and returns the overrides of a
// small real PPO run with a critic (GAE, KL in the reward) on the default model.
func gaeRun(t *testing.T, runDir string) []string {
	t.Helper()
	mpath := modelPath(t)
	pdir := t.TempDir()
	if out, err := exec.Command("go", "build", "-o", filepath.Join(pdir, "rlhost-task-gsm8k"),
		"../../tasks/gsm8k/cmd/rlhost-task-gsm8k").CombinedOutput(); err != nil {
		t.Fatalf("building the gsm8k plugin: %v\n%s", err, out)
	}
	t.Setenv("RLHOST_PLUGIN_PATH", pdir)
	var rows []data.Row
	for i, q := range [][2]string{{"What is 2+3?", "5"}, {"Tom has 4 apples and eats 1. How many are left?", "3"}} {
		rows = append(rows, data.Row{DataSource: "openai/gsm8k", Ability: "math", AgentName: "single_turn_agent",
			Prompt:      []data.Message{{Role: "user", Content: q[0] + " Give the answer as a number."}},
			RewardModel: data.RewardModel{Style: "rule", GroundTruth: q[1]},
			ExtraInfo:   map[string]any{"index": int64(i), "split": "train"}})
	}
	pq := filepath.Join(t.TempDir(), "train.parquet")
	if err := data.WriteParquet(pq, rows); err != nil {
		t.Fatal(err)
	}
	return []string{"task.name=gsm8k", "task.config.score_method=flexible", "task.config.format_score=0.1",
		"data.train_files=" + pq, "data.val_files=" + pq, "data.val_max_samples=1", "trainer.val_before_train=false", "trainer.test_freq=-1",
		"data.train_batch_size=2", "actor_rollout_ref.rollout.n=2", "data.max_prompt_length=128", "data.max_response_length=16",
		"actor_rollout_ref.actor.ppo_mini_batch_size=2", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
		"actor_rollout_ref.rollout.max_num_seqs=4", "actor_rollout_ref.model.path=" + mpath,
		"algorithm.adv_estimator=gae", "algorithm.gamma=1.0", "algorithm.lam=0.95", "algorithm.use_kl_in_reward=true",
		"critic.ppo_micro_batch_size_per_gpu=2", "critic.optim.lr=1e-4", "trainer.critic_warmup=2",
		"trainer.total_training_steps=2", "trainer.save_freq=1", "trainer.logger=[jsonl]",
		"trainer.resume_mode=auto", "trainer.run_dir=" + runDir}
}

// A real PPO run with a critic: two steps of rollouts, values, GAE with KL-in-reward
// token rewards, critic updates, and actor updates once the critic warm-up
// (trainer.critic_warmup=2: from step 2) is over; veRL's critic/* metrics are logged; the first
// step's values are those of the zero head (0) and the second step's are not; and a trainer
// that resumes from the last checkpoint has the critic, its optimizer moments and step
// exactly as the run left them.
func TestTrainGAE(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model with a critic")
	}
	dir := filepath.Join(t.TempDir(), "run")
	overrides := gaeRun(t, dir)
	ctx := context.Background()
	tr := startTrainer(t, overrides, Options{Progress: os.Stderr})
	if tr.critic == nil {
		tr.Close()
		t.Fatal("adv_estimator=gae built no critic")
	}
	if err := tr.Run(ctx); err != nil {
		tr.Close()
		t.Fatal(err)
	}
	params := append([]float32(nil), tr.critic.vm.Body.Params.Data...)
	head := append([]float32(nil), tr.critic.vm.Head...)
	m, v := tr.critic.opt.Moments()
	m, v = append([]float32(nil), m...), append([]float32(nil), v...)
	optStep := tr.critic.opt.Step
	tr.Close()

	steps := loggedSteps(t, dir, 2)
	for _, s := range steps {
		for _, k := range []string{"critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean", "critic/grad_norm", "critic/lr",
			"critic/values/mean", "critic/values/max", "critic/values/min", "critic/returns/mean", "critic/returns/max",
			"critic/returns/min", "critic/vf_explained_var", "critic/advantages/mean", "timing_s/values", "timing_s/update_critic",
			"actor/reward_kl_penalty"} {
			x, ok := s.Values[k]
			if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
				t.Errorf("step %d: metric %s = %v (logged: %v)", s.Step, k, x, ok)
			}
		}
	}
	s1, s2 := steps[0].Values, steps[1].Values
	// critic_warmup=2: step 1 trains only the critic, step 2 the actor too
	for _, k := range []string{"actor/pg_loss", "actor/grad_norm", "timing_s/update_actor"} {
		if _, ok := s1[k]; ok {
			t.Errorf("step 1 logs %s: the actor was updated during the critic warm-up", k)
		}
		if _, ok := s2[k]; !ok {
			t.Errorf("step 2 lacks %s: the actor was not updated after the critic warm-up", k)
		}
	}
	t.Logf("step 1: vf_loss %.4f returns/mean %.4f values/mean %.4f; step 2: vf_loss %.4f returns/mean %.4f values/mean %.4f",
		s1["critic/vf_loss"], s1["critic/returns/mean"], s1["critic/values/mean"], s2["critic/vf_loss"], s2["critic/returns/mean"], s2["critic/values/mean"])
	if s1["critic/values/max"] != 0 || s1["critic/values/min"] != 0 {
		t.Errorf("step 1 values in [%v, %v]: a fresh critic values every token 0", s1["critic/values/min"], s1["critic/values/max"])
	}
	if s2["critic/values/max"] == 0 && s2["critic/values/min"] == 0 {
		t.Error("step 2 values are still all 0: the critic did not move")
	}
	if s1["critic/vf_loss"] <= 0 || s1["critic/grad_norm"] <= 0 {
		t.Errorf("step 1: vf_loss %v grad_norm %v", s1["critic/vf_loss"], s1["critic/grad_norm"])
	}
	if optStep != 2 {
		t.Errorf("critic optimizer step %d after two steps of one mini-batch", optStep)
	}
	for _, f := range []string{"critic/model.safetensors", "critic/config.json", "critic/value_head.safetensors", "critic_optimizer.bin"} {
		if _, err := os.Stat(filepath.Join(dir, "checkpoints", "global_step_2", f)); err != nil {
			t.Errorf("checkpoint lacks %s", f)
		}
	}

	// resume: the same run again finds global_step_2 and restores the critic bit for bit
	tr2 := startTrainer(t, overrides, Options{})
	defer tr2.Close()
	if tr2.step != 2 || tr2.critic.opt.Step != optStep {
		t.Fatalf("resumed at step %d with critic optimizer step %d, want 2 and %d", tr2.step, tr2.critic.opt.Step, optStep)
	}
	m2, v2 := tr2.critic.opt.Moments()
	for _, c := range []struct {
		what      string
		want, got []float32
	}{{"decoder", params, tr2.critic.vm.Body.Params.Data}, {"head", head, tr2.critic.vm.Head},
		{"first moments", m, m2}, {"second moments", v, v2}} {
		if len(c.got) != len(c.want) {
			t.Fatalf("%s: %d values after resume, want %d", c.what, len(c.got), len(c.want))
		}
		for i := range c.want {
			if math.Float32bits(c.got[i]) != math.Float32bits(c.want[i]) {
				t.Fatalf("%s[%d] = %v after resume, want %v", c.what, i, c.got[i], c.want[i])
			}
		}
	}
}

// critic.model.path: a new run whose critic starts from the critic/ directory of this run's
// last checkpoint gets that decoder and head bit for bit and a fresh optimizer, while the
// actor still starts from actor_rollout_ref.model.path; a checkpoint with another vocabulary
// and no tokenizer is refused with both paths named.
func TestCriticModelPath(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model with a critic")
	}
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "run")
	overrides := gaeRun(t, dir)
	tr := startTrainer(t, append(overrides, "trainer.total_training_steps=1", "trainer.critic_warmup=1"), Options{})
	if err := tr.Run(ctx); err != nil {
		tr.Close()
		t.Fatal(err)
	}
	params := append([]float32(nil), tr.critic.vm.Body.Params.Data...)
	head := append([]float32(nil), tr.critic.vm.Head...)
	tr.Close()
	if !slices.ContainsFunc(head, func(x float32) bool { return x != 0 }) {
		t.Fatal("the trained critic's head is still zero: the test would not tell a loaded head from a fresh one")
	}

	fresh := func(extra ...string) (*Trainer, error) {
		o := append(slices.Clone(overrides), "trainer.run_dir="+filepath.Join(t.TempDir(), "run2"), "trainer.resume_mode=disable")
		return New(ctx, loadConfig(t, append(o, extra...)), Options{})
	}
	criticDir := filepath.Join(dir, "checkpoints", "global_step_1", "critic")
	tr2, err := fresh("critic.model.path=" + criticDir)
	if err != nil {
		t.Fatal(err)
	}
	defer tr2.Close()
	if tr2.step != 0 || tr2.critic.opt.Step != 0 {
		t.Errorf("a new run starts at step %d with critic optimizer step %d, want 0 and 0", tr2.step, tr2.critic.opt.Step)
	}
	if !slices.Equal(tr2.critic.vm.Head, head) {
		t.Errorf("critic head %v..., want the checkpoint's %v...", tr2.critic.vm.Head[:3], head[:3])
	}
	if !slices.Equal(tr2.critic.vm.Body.Params.Data, params) {
		t.Error("the critic's decoder is not the checkpoint's")
	}
	if slices.Equal(tr2.actor.Params.Data, params) {
		t.Error("the actor starts from the critic's checkpoint: it must start from actor_rollout_ref.model.path")
	}

	tiny := filepath.Join("..", "..", "gpu", "model", "testdata", "tiny-llama")
	_, err = fresh("critic.model.path=" + tiny)
	if err == nil || !strings.Contains(err.Error(), "critic.model.path "+tiny) || !strings.Contains(err.Error(), "no tokenizer") ||
		!strings.Contains(err.Error(), "49152") {
		t.Fatalf("a critic checkpoint with 128 tokens and no tokenizer: %v", err)
	}
}
