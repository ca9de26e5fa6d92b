package trainer

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/chatserver/chatservertest"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
)

func TestMain(m *testing.M) {
	if err := cpu.EnsureCoreType(); err != nil {
		panic(err)
	}
	// The tests build the default model (540 MB of float32 weights) many times, up to ten
	// copies at once (a multi-rank run with critics): without a limit the heap grows to twice
	// its peak and returns freed memory slowly, about 20 GB, beside the other packages'
	// tests that make test runs at the same time. The limit makes the collector keep the
	// heap near what is live.
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(testMemoryLimit)
	}
	os.Exit(m.Run())
}

// testMemoryLimit is the tests' soft memory limit (GOMEMLIMIT overrides it).
const testMemoryLimit = 10 << 30

// modelPath and smol: the default model (chatservertest.ModelPath: $RLHOST_MODEL, the
// checkout's models/, the cache folder; skipped when missing, failed under CI).
func modelPath(t *testing.T) string { return chatservertest.ModelPath(t) }

func smol(t *testing.T) (*model.Model, *tokenizer.Tokenizer) { return chatservertest.LoadDefault(t) }

func prompt(t *testing.T, tk *tokenizer.Tokenizer, q string) []int {
	ids, err := rollout.Chat{Tok: tk}.EncodePrompt(rollout.SingleTurnAgent, task.Prompt{Messages: []task.Message{{Role: "user", Content: q}}})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// The training forward over packed batches must give the same log-probs as the sampler gave
// for the tokens it drew (temperature 1): this checks the packing of prompts and responses,
// the target alignment, and generation with a KV cache against the full forward.
func TestTrainingLogprobsMatchSampler(t *testing.T) {
	m, tk := smol(t)
	pol, err := rollout.NewModelPolicy(m, 4, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	ctx := context.Background()
	var outs []*rollout.Output
	for i, q := range []string{"What is 2+3?", "Name a colour.", "Say hello in French, then count to three."} {
		p := prompt(t, tk, q)
		g, err := pol.Generate(ctx, p, rollout.SamplingParams{MaxTokens: 12 + 4*i, Temperature: 1, Seed: uint64(i + 1)})
		if err != nil {
			t.Fatal(err)
		}
		mask := make([]float32, len(g.Tokens))
		for j := range mask {
			mask[j] = 1
		}
		if i == 2 && len(mask) > 4 { // an observation-like hole: masked tokens are skipped
			mask[2], mask[3] = 0, 0
		}
		outs = append(outs, &rollout.Output{PromptIDs: p, ResponseIDs: g.Tokens, ResponseMask: mask, ResponseLogprobs: g.Logprobs})
	}
	b := newBatch(outs)
	logp, ent, err := b.logProbs(m, model.NewActsCache(m, 4), 2)
	if err != nil {
		t.Fatal(err)
	}
	worst := 0.0
	for i, o := range outs {
		for j := range o.ResponseIDs {
			got := float64(logp[i*b.Tr+j])
			if o.ResponseMask[j] == 0 {
				if got != 0 {
					t.Errorf("masked token %d/%d has log-prob %v", i, j, got)
				}
				continue
			}
			want := float64(o.ResponseLogprobs[j])
			worst = math.Max(worst, math.Abs(got-want))
			if math.Abs(got-want) > 2e-3*math.Max(1, math.Abs(want)) {
				t.Errorf("trajectory %d token %d: training log-prob %.5f, sampler %.5f", i, j, got, want)
			}
			if ent[i*b.Tr+j] <= 0 {
				t.Errorf("trajectory %d token %d: entropy %v", i, j, ent[i*b.Tr+j])
			}
		}
	}
	t.Logf("largest |training - sampler| log-prob difference: %.2e", worst)
}

// One GRPO update with a reward for one response of a pair raises that response's
// log-probability and lowers the other's.
func TestGRPOUpdateMovesTowardsReward(t *testing.T) {
	m, tk := smol(t)
	pol, err := rollout.NewModelPolicy(m, 2, 256)
	if err != nil {
		t.Fatal(err)
	}
	defer pol.Close()
	ctx := context.Background()
	p := prompt(t, tk, "Pick a number between 1 and 10.")
	var outs []*rollout.Output
	for i := 0; i < 2; i++ {
		g, err := pol.Generate(ctx, p, rollout.SamplingParams{MaxTokens: 10, Temperature: 1, Seed: uint64(100 + i)})
		if err != nil {
			t.Fatal(err)
		}
		mask := make([]float32, len(g.Tokens))
		for j := range mask {
			mask[j] = 1
		}
		outs = append(outs, &rollout.Output{PromptIDs: p, ResponseIDs: g.Tokens, ResponseMask: mask,
			Sample: &rollout.Sample{UID: "g"}})
	}
	b := newBatch(outs)
	cache := model.NewActsCache(m, 4)
	before, _, err := b.logProbs(m, cache, 2)
	if err != nil {
		t.Fatal(err)
	}
	scores := []float64{1, 0}
	tokenRewards := make([]float32, b.B*b.Tr)
	for i, o := range outs {
		tokenRewards[i*b.Tr+len(o.ResponseIDs)-1] = float32(scores[i])
	}
	adv, _ := algo.GRPOAdvantages(tokenRewards, b.mask, b.B, b.Tr, []string{"g", "g"}, true)
	opt := model.NewAdamW(m, model.AdamWConfig{LR: 2e-5, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, MaxGradNorm: 1})
	m.ZeroGrads()
	mb, lay := b.pack(0, 2)
	a := cache.Get(mb.B, mb.T)
	if err := m.Forward(a, mb); err != nil {
		t.Fatal(err)
	}
	logp := make([]float32, b.B*b.Tr)
	b.extract(logp, a.Logp, lay, 0, 2)
	pl := algo.PolicyLoss(logp, logp, adv, b.mask, b.B, b.Tr, algo.PolicyLossConfig{ClipLow: 0.2, ClipHigh: 0.2, ClipC: 3})
	rows := make([]float32, mb.B*mb.T)
	b.scatter(rows, pl.DLogp, lay, 0, 2)
	if err := m.Backward(a, rows, make([]float32, mb.B*mb.T)); err != nil {
		t.Fatal(err)
	}
	norm, err := opt.Update(m)
	if err != nil || norm == 0 {
		t.Fatalf("grad norm %v, %v", norm, err)
	}
	after, _, err := b.logProbs(m, cache, 2)
	if err != nil {
		t.Fatal(err)
	}
	seq := func(x []float32, i int) float64 {
		s := 0.0
		for j := range outs[i].ResponseIDs {
			s += float64(x[i*b.Tr+j])
		}
		return s
	}
	up, down := seq(after, 0)-seq(before, 0), seq(after, 1)-seq(before, 1)
	t.Logf("rewarded response log-prob %+.4f, the other %+.4f (grad norm %.3f)", up, down, norm)
	if !(up > 0 && down < 0) {
		t.Fatalf("after the update the rewarded response changed by %+.4f and the other by %+.4f; want + and -", up, down)
	}
}

func TestSamplerEpochsAndSeek(t *testing.T) {
	s := newSampler(10, 3, 7, true)
	if s.StepsPerEpoch() != 3 {
		t.Fatalf("steps per epoch %d", s.StepsPerEpoch())
	}
	seen := map[int]bool{}
	for i := 0; i < 3; i++ {
		for _, j := range s.Next() {
			if seen[j] {
				t.Fatalf("row %d twice in an epoch", j)
			}
			seen[j] = true
		}
	}
	next := s.Next() // epoch 1
	if s.Epoch != 1 {
		t.Fatalf("epoch %d", s.Epoch)
	}
	r := newSampler(10, 3, 7, true)
	r.Seek(1, 0)
	if got := r.Next(); got[0] != next[0] || got[1] != next[1] || got[2] != next[2] {
		t.Fatalf("after Seek: %v, want %v", got, next)
	}
}

func TestTruncatePrompt(t *testing.T) {
	ids := []int{1, 2, 3, 4, 5, 6}
	for side, want := range map[string][]int{"left": {3, 4, 5, 6}, "right": {1, 2, 3, 4}, "middle": {1, 2, 5, 6}} {
		got := truncatePrompt(ids, 4, side)
		for i := range want {
			if got[i] != want[i] {
				t.Errorf("%s: %v, want %v", side, got, want)
				break
			}
		}
	}
}
