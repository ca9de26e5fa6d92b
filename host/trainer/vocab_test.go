package trainer

import (
	"context"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/metrics"
	"github.com/rlhost/rlhost/host/rollout"
)

const tinyChat = "../sft/testdata/tiny-chat" // a tiny Llama and its tokenizer: 258 ids, vocab_size 258

// paddedCheckpoint writes tiny-chat with its embedding and head grown from 258 to V rows (the
// new rows random, of the old rows' scale), with tiny-chat's tokenizer files beside it: a model
// whose vocab_size exceeds its tokenizer's, as Qwen2.5's checkpoints are.
func paddedCheckpoint(t *testing.T, V int) string {
	t.Helper()
	ck, err := weights.Load(tinyChat)
	if err != nil {
		t.Fatal(err)
	}
	old := ck.Config.VocabSize
	rng := rand.New(rand.NewPCG(1, 2))
	for _, name := range []string{"model.embed_tokens.weight", "lm_head.weight"} {
		w := ck.Tensors[name]
		if w == nil || w.Shape[0] != old {
			t.Fatalf("tiny-chat %s: %v", name, w)
		}
		C := w.Shape[1]
		var ss float64
		for _, x := range w.Data {
			ss += float64(x) * float64(x)
		}
		std := float32(math.Sqrt(ss / float64(len(w.Data))))
		for range (V - old) * C {
			w.Data = append(w.Data, float32(rng.NormFloat64())*std)
		}
		w.Shape[0] = V
	}
	ck.Config.VocabSize = V
	dir := t.TempDir()
	if err := weights.Save(dir, ck); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile(filepath.Join(tinyChat, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A checkpoint whose vocab_size (400) exceeds its tokenizer's 258 ids is accepted; its policy
// samples ids the tokenizer lacks, and decoding a response with such ids gives the text of the
// others instead of failing. A tokenizer with more ids than the model embeds is refused with
// an error naming the path and both sizes.
func TestVocabLargerThanTokenizer(t *testing.T) {
	dir := paddedCheckpoint(t, 400)
	tk, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	ck, err := weights.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.New(cpu.New(), ck)
	if err != nil {
		t.Fatal(err)
	}
	if tk.VocabSize() != 258 || m.Config.V != 400 {
		t.Fatalf("tokenizer %d ids, model vocab %d; want 258 and 400", tk.VocabSize(), m.Config.V)
	}
	if err := checkVocab(tk, m.Config, dir); err != nil {
		t.Fatalf("vocab_size 400 over a 258-id tokenizer: %v", err)
	}

	pol, err := rollout.NewModelPolicy(m, 4, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	pr := tk.Encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", false)
	gens := make([]rollout.Generation, 4)
	var wg sync.WaitGroup
	for i := range gens {
		wg.Go(func() {
			g, err := pol.Generate(context.Background(), pr, rollout.SamplingParams{MaxTokens: 32, Temperature: 1, TopP: 1, Seed: uint64(i + 1)})
			if err != nil {
				t.Error(err)
			}
			gens[i] = g
		})
	}
	wg.Wait()
	beyond := 0
	for _, g := range gens {
		known := slices.DeleteFunc(slices.Clone(g.Tokens), func(id int) bool { return id >= tk.VocabSize() })
		beyond += len(g.Tokens) - len(known)
		for _, skip := range []bool{false, true} {
			if got, want := tk.Decode(g.Tokens, skip), tk.Decode(known, skip); got != want {
				t.Errorf("decode(skip special %v) of %v = %q; want the text of its known ids %q", skip, g.Tokens, got, want)
			}
		}
		if slices.ContainsFunc(g.Tokens, func(id int) bool { return id < 0 || id >= 400 }) {
			t.Errorf("sampled ids outside the model's 400: %v", g.Tokens)
		}
	}
	if beyond == 0 {
		t.Fatalf("no sampled id at or above the tokenizer's 258 in %v: the test checks nothing", gens)
	}
	t.Logf("%d sampled ids the tokenizer lacks", beyond)

	small, err := weights.Load("../../gpu/model/testdata/tiny-llama") // vocab_size 128
	if err != nil {
		t.Fatal(err)
	}
	sm, err := model.New(cpu.New(), small)
	if err != nil {
		t.Fatal(err)
	}
	err = checkVocab(tk, sm.Config, "tiny-llama")
	if err == nil || !strings.Contains(err.Error(), "actor_rollout_ref.model.path tiny-llama") ||
		!strings.Contains(err.Error(), "258 ids") || !strings.Contains(err.Error(), "vocab_size is 128") {
		t.Fatalf("a 258-id tokenizer on a 128-row model: %v", err)
	}
}

// One GRPO step of the trainer on the padded checkpoint: start-up accepts it, and rollouts
// that sample ids the tokenizer lacks are decoded, scored and trained on.
func TestTrainVocabLargerThanTokenizer(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the gsm8k plugin and trains")
	}
	dir := paddedCheckpoint(t, 400)
	run := filepath.Join(t.TempDir(), "run")
	overrides := append(gaeRun(t, run), "actor_rollout_ref.model.path="+dir, "algorithm.adv_estimator=grpo",
		"algorithm.use_kl_in_reward=false", "trainer.critic_warmup=0", "trainer.total_training_steps=1", "trainer.save_freq=-1",
		"actor_rollout_ref.rollout.temperature=1.0")
	ctx := context.Background()
	tr := startTrainer(t, overrides, Options{Progress: os.Stderr})
	defer tr.Close()
	if tr.critic != nil {
		t.Fatal("adv_estimator=grpo built a critic")
	}
	if err := tr.Run(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := metrics.ReadJSONL(filepath.Join(run, "metrics.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("%d metrics rows; want 1 step", len(rows))
	}
	for _, k := range []string{"actor/pg_loss", "actor/grad_norm", "critic/score/mean"} {
		if x, ok := rows[0].Values[k]; !ok || math.IsNaN(x) || math.IsInf(x, 0) {
			t.Errorf("metric %s = %v (logged: %v)", k, x, ok)
		}
	}
}

// A config.json without eos_token_id (null, as a freshly made qwen2 config has): the trainer's
// rollouts stop at the tokenizer's eos (<|im_end|>, 257), not at id 0.
func TestTrainNoEOSInConfig(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the gsm8k plugin")
	}
	dir := paddedCheckpoint(t, 300)
	ck, err := weights.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ck.Config.NoEOS = true
	if err := weights.Save(dir, ck); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil || !strings.Contains(string(b), `"eos_token_id": null`) {
		t.Fatalf("saved config.json: %v\n%s", err, b)
	}
	overrides := append(gaeRun(t, filepath.Join(t.TempDir(), "run")), "actor_rollout_ref.model.path="+dir,
		"algorithm.adv_estimator=grpo", "algorithm.use_kl_in_reward=false", "trainer.critic_warmup=0")
	tr := startTrainer(t, overrides, Options{Progress: os.Stderr})
	defer tr.Close()
	if tr.actor.Config.EOS != 257 {
		t.Fatalf("actor eos %d; want the tokenizer's 257", tr.actor.Config.EOS)
	}
}
