package trainer

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/gguf"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/rollout"
)

// tinyCritic is a critic on gpu/model's tiny random Llama (vocabulary 128).
func tinyCritic(t *testing.T, lr float64) *critic {
	t.Helper()
	ck, err := weights.Load(filepath.Join("..", "..", "gpu", "model", "testdata", "tiny-llama"))
	if err != nil {
		t.Fatal(err)
	}
	cc := config.Default().Critic
	cc.Optim.LR = lr
	c, err := newCritic(cpu.New(), ck, cc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeBatch is B trajectories of random tokens with a tool-observation hole in the middle of
// every other response, and a score on the last model token of each.
func fakeBatch(B int, seed uint64) (*batchOf, []float32) {
	r := rand.New(rand.NewPCG(seed, 1))
	var outs []*rollout.Output
	for i := 0; i < B; i++ {
		p := make([]int, 4+r.IntN(4))
		for j := range p {
			p[j] = 3 + r.IntN(120)
		}
		resp := make([]int, 6+r.IntN(6))
		mask := make([]float32, len(resp))
		for j := range resp {
			resp[j] = 3 + r.IntN(120)
			mask[j] = 1
		}
		if i%2 == 1 {
			mask[2], mask[3] = 0, 0
		}
		outs = append(outs, &rollout.Output{PromptIDs: p, ResponseIDs: resp, ResponseMask: mask, Sample: &rollout.Sample{UID: "u"}})
	}
	b := newBatch(outs)
	rewards := make([]float32, b.B*b.Tr)
	for i, o := range outs {
		rewards[i*b.Tr+len(o.ResponseIDs)-1] = float32(i%3) - 0.5 // -0.5, 0.5, 1.5, ...
	}
	return b, rewards
}

func maskedMSE(a, b, mask []float32) float64 {
	var s, n float64
	for i, m := range mask {
		if m != 0 {
			d := float64(a[i]) - float64(b[i])
			s += d * d
			n++
		}
	}
	return s / n
}

// The critic's updates move its values toward the GAE returns: on a fixed batch, every few
// updates lower the squared error, and the values at masked tokens stay 0.
func TestCriticLearnsReturns(t *testing.T) {
	c := tinyCritic(t, 3e-3)
	b, rewards := fakeBatch(6, 7)
	v0, err := c.values(b, 4)
	if err != nil {
		t.Fatal(err)
	}
	_, returns := algo.GAEAdvantages(rewards, v0, b.mask, b.B, b.Tr, 0.99, 0.95)
	first := maskedMSE(v0, returns, b.mask)
	prev := first
	u := criticUpdate{MiniSeqs: 6, Micro: 4, Epochs: 1, ClipRange: 0.5, AggMode: algo.TokenMean, LR: 3e-3}
	for k := 0; k < 12; k++ {
		v, err := c.values(b, 3)
		if err != nil {
			t.Fatal(err)
		}
		m, err := c.update(context.Background(), b, v, returns, u)
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"critic/vf_loss", "critic/vf_clipfrac", "critic/vpred_mean", "critic/grad_norm", "critic/lr"} {
			if _, ok := m[key]; !ok {
				t.Fatalf("update metrics lack %s: %v", key, m)
			}
		}
		// the loss the update reports is half the squared error of the values it started from
		if want := 0.5 * maskedMSE(v, returns, b.mask); math.Abs(m["critic/vf_loss"]-want) > 1e-4*math.Max(1, want) {
			t.Errorf("update %d: vf_loss %v, want 0.5*mse %v", k, m["critic/vf_loss"], want)
		}
		if k%4 == 3 {
			e := maskedMSE(v, returns, b.mask)
			if e >= prev {
				t.Errorf("after %d updates the squared error is %.4f, not below %.4f", k+1, e, prev)
			}
			prev = e
		}
		for i, mk := range b.mask {
			if mk == 0 && v[i] != 0 {
				t.Fatalf("masked token %d has value %v", i, v[i])
			}
		}
	}
	t.Logf("squared error of the values to the returns: %.4f at first, %.4f after 12 updates", first, prev)
	if prev > 0.5*first {
		t.Errorf("12 updates took the squared error only from %.4f to %.4f", first, prev)
	}
}

// Micro-batching does not change an update: the gradients accumulate to the full
// mini-batch's (the loss is aggregated over the mini-batch, here seq-mean-token-mean).
func TestCriticMicroBatchesAccumulate(t *testing.T) {
	b, rewards := fakeBatch(4, 3)
	var got [2][]float32
	for i, micro := range []int{4, 1} {
		c := tinyCritic(t, 1e-3)
		c.vm.Head[0], c.vm.Head[5] = 0.3, -0.2 // a head that passes gradients to the decoder
		c.opt.Config.MaxGradNorm = 0           // clipping would hide a wrong scale
		v, err := c.values(b, 4)
		if err != nil {
			t.Fatal(err)
		}
		_, ret := algo.GAEAdvantages(rewards, v, b.mask, b.B, b.Tr, 1, 1)
		u := criticUpdate{MiniSeqs: 4, Micro: micro, Epochs: 1, ClipRange: 0.5, AggMode: algo.SeqMeanTokenMean, LR: 1e-3}
		if _, err := c.update(context.Background(), b, v, ret, u); err != nil {
			t.Fatal(err)
		}
		// the accumulated (and identically clipped) gradients the AdamW step used
		got[i] = append(append([]float32(nil), c.vm.Body.Grads.Data...), c.vm.HeadGrad...)
	}
	var worst, scale float64
	for i := range got[0] {
		worst = math.Max(worst, math.Abs(float64(got[0][i]-got[1][i])))
		scale = math.Max(scale, math.Abs(float64(got[0][i])))
	}
	if scale == 0 || worst > 1e-5*scale {
		t.Errorf("one micro-batch of 4 and four of 1 give gradients %g apart (largest %g)", worst, scale)
	}
}

// save then load restores the critic, its optimizer moments and step exactly.
func TestCriticCheckpointRoundTrip(t *testing.T) {
	c := tinyCritic(t, 1e-3)
	b, rewards := fakeBatch(4, 5)
	for k := 0; k < 2; k++ {
		v, err := c.values(b, 2)
		if err != nil {
			t.Fatal(err)
		}
		_, ret := algo.GAEAdvantages(rewards, v, b.mask, b.B, b.Tr, 1, 1)
		if _, err := c.update(context.Background(), b, v, ret, criticUpdate{MiniSeqs: 2, Micro: 2, Epochs: 1, ClipRange: 0.2, AggMode: algo.TokenMean, LR: 1e-3}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	if err := c.save(dir); err != nil {
		t.Fatal(err)
	}
	if err := c.saveMoments(context.Background(), filepath.Join(dir, criticOptimizerFile)); err != nil {
		t.Fatal(err)
	}
	back := tinyCritic(t, 1e-3)
	if err := back.load(dir, c.opt.Step); err != nil {
		t.Fatal(err)
	}
	same := func(what string, x, y []float32) {
		for i := range x {
			if math.Float32bits(x[i]) != math.Float32bits(y[i]) {
				t.Fatalf("%s[%d] = %v after load, want %v", what, i, y[i], x[i])
			}
		}
	}
	same("decoder", c.vm.Body.Params.Data, back.vm.Body.Params.Data)
	same("head", c.vm.Head, back.vm.Head)
	m1, v1 := c.opt.Moments()
	m2, v2 := back.opt.Moments()
	same("first moments", m1, m2)
	same("second moments", v1, v2)
	if back.opt.Step != 4 {
		t.Errorf("optimizer step %d, want 4", back.opt.Step)
	}
	if err := back.load(t.TempDir(), 1); err == nil {
		t.Error("loading a checkpoint without a critic succeeded")
	}
}

func TestCriticDataMetrics(t *testing.T) {
	values := []float32{1, 2, 9, 3}
	returns := []float32{2, 2, -7, 5}
	adv := []float32{0.5, -1, 4, 2}
	mask := []float32{1, 1, 0, 1}
	m, _ := criticDataMetrics(values, returns, adv, mask, nil)
	// valid: values 1 2 3, returns 2 2 5, returns - values 1 0 2 (variance 1), returns variance 3
	want := map[string]float64{"critic/values/mean": 2, "critic/values/max": 3, "critic/values/min": 1,
		"critic/returns/mean": 3, "critic/returns/max": 5, "critic/returns/min": 2,
		"critic/advantages/max": 2, "critic/advantages/min": -1, "critic/vf_explained_var": 1 - 1/(3+1e-5)}
	for k, w := range want {
		if math.Abs(m[k]-w) > 1e-9 {
			t.Errorf("%s = %v, want %v", k, m[k], w)
		}
	}
	if m, _ := criticDataMetrics(values, returns, adv, make([]float32, 4), nil); len(m) != 0 {
		t.Error("metrics of an empty mask")
	}
}

// critic.ppo_mini_batch_size and critic.ppo_epochs set the critic's optimiser steps per
// training step (ceil(trajectories / (mini * n)) per epoch); null takes the actor's.
func TestCriticMiniBatchesAndEpochs(t *testing.T) {
	cfg := config.Default()
	for _, o := range []string{"algorithm.adv_estimator=gae", "data.train_batch_size=4", "actor_rollout_ref.rollout.n=2",
		"actor_rollout_ref.actor.ppo_mini_batch_size=4", "actor_rollout_ref.actor.ppo_epochs=1", "critic.ppo_micro_batch_size_per_gpu=2"} {
		if err := cfg.Apply(o); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		overrides          []string
		miniSeqs, epochs   int
		optimiserStepsWant int // over the 8 trajectories of fakeBatch(8)
	}{
		{nil, 8, 1, 1}, // the actor's: 4 prompts x n=2, one epoch
		{[]string{"critic.ppo_mini_batch_size=1"}, 2, 1, 4},
		{[]string{"critic.ppo_mini_batch_size=2", "critic.ppo_epochs=3"}, 4, 3, 6},
		{[]string{"critic.ppo_mini_batch_size=null", "critic.ppo_epochs=null", "actor_rollout_ref.actor.ppo_epochs=2"}, 8, 2, 2},
	}
	for _, tc := range cases {
		for _, o := range tc.overrides {
			if err := cfg.Apply(o); err != nil {
				t.Fatal(err)
			}
		}
		u := criticUpdateFor(cfg, 0, 10)
		if u.MiniSeqs != tc.miniSeqs || u.Epochs != tc.epochs || u.Micro != 2 {
			t.Errorf("%v: mini-batch %d trajectories, %d epochs, micro %d; want %d, %d, 2", tc.overrides, u.MiniSeqs, u.Epochs, u.Micro, tc.miniSeqs, tc.epochs)
		}
		c := tinyCritic(t, 1e-3)
		b, rewards := fakeBatch(8, 5)
		values, err := c.values(b, 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.update(context.Background(), b, values, rewards, u); err != nil {
			t.Fatal(err)
		}
		if c.opt.Step != tc.optimiserStepsWant {
			t.Errorf("%v: %d critic optimiser steps, want %d", tc.overrides, c.opt.Step, tc.optimiserStepsWant)
		}
	}
}

// sameTokenizer accepts the actor's own tokenizer and refuses one whose vocabulary maps two
// digits to each other's ids (same size, same eos: only the probe tells them apart).
func TestSameTokenizer(t *testing.T) {
	f, err := gguf.Open(modelPath(t))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	js, tcfg, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	load := func(name string, b []byte) *tokenizer.Tokenizer {
		tk, err := tokenizer.FromJSON(name, b, tcfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tk.Close() })
		return tk
	}
	a, b := load("a", js), load("b", js)
	if err := sameTokenizer(a, b); err != nil {
		t.Fatalf("the same tokenizer twice: %v", err)
	}
	var doc map[string]any
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	vocab := doc["model"].(map[string]any)["vocab"].(map[string]any)
	vocab["4"], vocab["8"] = vocab["8"], vocab["4"]
	swapped, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	err = sameTokenizer(a, load("swapped", swapped))
	if err == nil || !strings.Contains(err.Error(), "probe text") {
		t.Fatalf("a tokenizer with two digits' ids swapped: %v, want the probe to differ", err)
	}
}

// TestLRScheduleOfOptim: an optim section as algo.LRSchedule (tested there): lr_warmup_steps,
// else lr_warmup_steps_ratio of the run's steps; warmup_style cosine or constant.
func TestLRScheduleOfOptim(t *testing.T) {
	o := config.Optim{LR: 2, LRWarmupSteps: 3, LRWarmupStepsRatio: 0.5, WarmupStyle: "cosine", MinLRRatio: 0.1}
	if got, want := lrSchedule(o, 10), (algo.LRSchedule{LR: 2, WarmupSteps: 3, Cosine: true, MinLRRatio: 0.1}); got != want {
		t.Errorf("lr_warmup_steps=3: %+v, want %+v", got, want)
	}
	o.LRWarmupSteps, o.WarmupStyle = 0, "constant"
	if got, want := lrSchedule(o, 10), (algo.LRSchedule{LR: 2, WarmupSteps: 5, MinLRRatio: 0.1}); got != want {
		t.Errorf("lr_warmup_steps_ratio=0.5 of 10 steps, constant: %+v, want %+v", got, want)
	}
}
