package trainer

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/rollout"
)

// tinyModel is a random two-layer Llama (N(0, 0.02) weights, unit norms).
func tinyModel() *model.Model {
	c := model.Config{Family: "llama", V: 256, C: 32, F: 64, L: 2, NH: 4, NKV: 2, HD: 8, MaxPos: 512,
		Eps: 1e-5, RopeTheta: 10000, Tied: true, BOS: 1, EOS: 2}
	m := model.NewZero(cpu.New(), c)
	r := rand.New(rand.NewPCG(3, 4))
	for _, p := range m.Params.Names {
		if strings.HasSuffix(p.Name, "norm.weight") {
			for i := range p.Data {
				p.Data[i] = 1
			}
			continue
		}
		for i := range p.Data {
			p.Data[i] = float32(r.NormFloat64() * 0.02)
		}
	}
	return m
}

// variedOutputs are trajectories of very different lengths, some with observation holes.
func variedOutputs(n int, seed uint64) []*rollout.Output {
	r := rand.New(rand.NewPCG(seed, 1))
	var outs []*rollout.Output
	for i := 0; i < n; i++ {
		P, R := 4+r.IntN(60), 2+r.IntN(150)
		o := &rollout.Output{PromptIDs: make([]int, P), ResponseIDs: make([]int, R), ResponseMask: make([]float32, R)}
		for j := range o.PromptIDs {
			o.PromptIDs[j] = 3 + r.IntN(250)
		}
		for j := range o.ResponseIDs {
			o.ResponseIDs[j] = 3 + r.IntN(250)
			o.ResponseMask[j] = 1
			if i%3 == 1 && j > 2 && j < 6 {
				o.ResponseMask[j] = 0
			}
		}
		outs = append(outs, o)
	}
	return outs
}

// The token-budget micro-batches of use_dynamic_bsz give the same accumulated gradient of a
// mini-batch as fixed micro-batches, to float tolerance, for every loss aggregation, with the
// clipped ratio and the KL loss in play; and the same old log-probs.
func TestDynamicBszSameGradients(t *testing.T) {
	outs := variedOutputs(10, 5)
	b := newBatch(outs)
	for _, mode := range []string{"token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"} {
		grads := map[bool][]float32{}
		pad := map[bool]float64{}
		for _, dyn := range []bool{false, true} {
			m := tinyModel()
			cfg := config.Default()
			ac := &cfg.ActorRolloutRef.Actor
			cfg.ActorRolloutRef.Rollout.N = 1
			ac.PPOMiniBatchSize, ac.PPOMicroBatchSizePerGPU, ac.PPOEpochs = 10, 2, 1
			ac.LossAggMode, ac.UseKLLoss, ac.KLLossCoef, ac.EntropyCoeff = mode, true, 0.1, 0.01
			ac.Optim.LR, ac.Optim.WeightDecay, ac.GradClip = 0, 0, 0 // keep the gradients, change nothing
			ac.UseDynamicBsz, ac.PPOMaxTokenLenPerGPU = dyn, 512
			tr := &Trainer{cfg: cfg, actor: m, acts: model.NewActsCache(m, 4), totalSteps: 1,
				opt: model.NewAdamW(m, model.AdamWConfig{Beta1: 0.9, Beta2: 0.999, Eps: 1e-8})}
			fixedLogp, _, err := b.logProbs(m, tr.acts, 3)
			if err != nil {
				t.Fatal(err)
			}
			order, spans, err := planLogProbs(b, 3, 384, "k")
			if err != nil {
				t.Fatal(err)
			}
			dynLogp, _, err := b.logProbsIn(m, tr.acts, order, spans)
			if err != nil {
				t.Fatal(err)
			}
			for i := range fixedLogp {
				if math.Abs(float64(fixedLogp[i]-dynLogp[i])) > 1e-5 {
					t.Fatalf("log-prob %d: fixed micro-batches %v, token budget %v", i, fixedLogp[i], dynLogp[i])
				}
			}
			order, spans, err = planLogProbsPacked(b, 3, 384, "k")
			if err != nil {
				t.Fatal(err)
			}
			packedLogp, _, err := b.logProbsIn(m, tr.acts, order, spans)
			if err != nil {
				t.Fatal(err)
			}
			for i := range fixedLogp {
				if math.Abs(float64(fixedLogp[i]-packedLogp[i])) > 1e-5 {
					t.Fatalf("log-prob %d: fixed micro-batches %v, packed %v", i, fixedLogp[i], packedLogp[i])
				}
			}
			r := rand.New(rand.NewPCG(9, 9))
			adv := make([]float32, len(fixedLogp))
			old := make([]float32, len(fixedLogp))
			ref := make([]float32, len(fixedLogp))
			for i := range adv {
				adv[i] = float32(r.NormFloat64()) * b.mask[i]
				old[i] = fixedLogp[i] + float32(r.NormFloat64()*0.3)*b.mask[i] // ratios beyond the clip range
				ref[i] = fixedLogp[i] + float32(r.NormFloat64()*0.1)*b.mask[i]
			}
			mets, err := tr.ppoUpdate(context.Background(), b, adv, old, ref, 1)
			if err != nil {
				t.Fatal(err)
			}
			pad[dyn] = mets["perf/update_padding_frac"]
			if mets["actor/pg_clipfrac"] == 0 {
				t.Errorf("%s: no ratio was clipped; the test should cover clipping", mode)
			}
			grads[dyn] = append([]float32(nil), m.Grads.Data...)
		}
		if !(pad[true] < pad[false]) {
			t.Errorf("%s: padding fraction %.3f with the token budget, %.3f with fixed micro-batches; want less", mode, pad[true], pad[false])
		}
		worst, scale := 0.0, 0.0
		for i := range grads[false] {
			worst = math.Max(worst, math.Abs(float64(grads[false][i]-grads[true][i])))
			scale = math.Max(scale, math.Abs(float64(grads[false][i])))
		}
		if scale == 0 || worst > 1e-4*scale {
			t.Errorf("%s: largest gradient difference %.3g (largest gradient %.3g)", mode, worst, scale)
		}
		t.Logf("%s: largest |fixed - dynamic| gradient %.2g of largest gradient %.2g; padding %.3f -> %.3f", mode, worst, scale, pad[false], pad[true])
	}
}

// TestPackedSpans: packed micro-batches of a length-sorted batch stay within the token
// budget (rounded up to the bucket), cover every trajectory once, and leave less than a
// bucket of filler per micro-batch.
func TestPackedSpans(t *testing.T) {
	outs := variedOutputs(16, 11)
	b := newBatch(outs)
	order, spans, err := planLogProbsPacked(b, 4, 512, "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu")
	if err != nil {
		t.Fatal(err)
	}
	pb := b.permute(order)
	seen := 0
	for _, s := range spans {
		mb, lay := pb.microBatch(s)
		if !s.packed || mb.Lengths == nil || mb.T > 512 || mb.T%64 != 0 {
			t.Errorf("micro-batch %v: packed %v, %d rows (lengths %v); want packed, a multiple of 64, at most 512", s, s.packed, mb.T, mb.Lengths)
		}
		sum := 0
		for i := s.lo; i < s.hi; i++ {
			if lay.start[i-s.lo] != sum {
				t.Errorf("micro-batch %v: trajectory %d starts at row %d, want %d", s, i, lay.start[i-s.lo], sum)
			}
			sum += pb.seqLen(i)
		}
		if mb.T-sum >= 64 {
			t.Errorf("micro-batch %v: %d filler rows", s, mb.T-sum)
		}
		seen += s.hi - s.lo
	}
	if seen != b.B {
		t.Errorf("micro-batches cover %d trajectories of %d", seen, b.B)
	}
	real, computed := paddingOf(pb, spans)
	_, padB := paddingOf(pb, func() []span { _, s, _ := planLogProbs(b, 4, 512, ""); return s }())
	t.Logf("padding: packed %d of %d rows (%.3f); padded with the same budget %d of %d (%.3f)",
		computed-real, computed, 1-float64(real)/float64(computed), padB-real, padB, 1-float64(real)/float64(padB))
	if computed-real >= 64*len(spans) || computed >= padB {
		t.Errorf("packed micro-batches compute %d rows for %d tokens (padded: %d)", computed, real, padB)
	}
	_, _, err = planLogProbsPacked(b, 4, 100, "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu")
	if err == nil || !strings.Contains(err.Error(), "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=100 is smaller than a trajectory of") {
		t.Errorf("a budget below the longest trajectory: %v", err)
	}
}

func TestBudgetSpans(t *testing.T) {
	outs := variedOutputs(16, 11)
	b := newBatch(outs)
	order, spans, err := planLogProbs(b, 4, 512, "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu")
	if err != nil {
		t.Fatal(err)
	}
	pb := b.permute(order)
	seen := 0
	for _, s := range spans {
		T := 0
		for i := s.lo; i < s.hi; i++ {
			T = max(T, bucket(pb.seqLen(i)))
			if i > s.lo && pb.seqLen(i) > pb.seqLen(i-1) {
				t.Errorf("micro-batch %v is not sorted longest first", s)
			}
		}
		if (s.hi-s.lo)*T > 512 {
			t.Errorf("micro-batch %v: %d x %d padded tokens, over the budget 512", s, s.hi-s.lo, T)
		}
		seen += s.hi - s.lo
	}
	if seen != b.B {
		t.Errorf("micro-batches cover %d trajectories of %d", seen, b.B)
	}
	realD, padD := paddingOf(pb, spans)
	realF, padF := paddingOf(b, fixedSpans(0, b.B, 4))
	if realD != realF || float64(padD-realD)/float64(padD) >= float64(padF-realF)/float64(padF) {
		t.Errorf("padding: token budget %d of %d, fixed %d of %d; want less with the budget", padD-realD, padD, padF-realF, padF)
	}
	_, _, err = planLogProbs(b, 4, 100, "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu")
	if err == nil || !strings.Contains(err.Error(), "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=100 is smaller than a trajectory of") {
		t.Errorf("a budget below the longest trajectory: %v", err)
	}
}

// The critic's token-budget micro-batches (critic.use_dynamic_bsz) give the same values and
// the same accumulated update gradient as fixed ones.
func TestCriticDynamicBszSameGradients(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 2))
	var outs []*rollout.Output
	for i := 0; i < 8; i++ {
		P, R := 4+r.IntN(26), 2+r.IntN(80)
		o := &rollout.Output{PromptIDs: make([]int, P), ResponseIDs: make([]int, R), ResponseMask: make([]float32, R),
			Sample: &rollout.Sample{UID: "u"}}
		for j := range o.PromptIDs {
			o.PromptIDs[j] = 3 + r.IntN(100)
		}
		for j := range o.ResponseIDs {
			o.ResponseIDs[j] = 3 + r.IntN(100)
			o.ResponseMask[j] = 1
		}
		outs = append(outs, o)
	}
	b := newBatch(outs)
	rewards := make([]float32, b.B*b.Tr)
	for i, o := range outs {
		rewards[i*b.Tr+len(o.ResponseIDs)-1] = float32(i%3) - 0.5
	}
	var got [2][]float32
	var vals [2][]float32
	var pad [2]float64
	for k, budget := range []int{0, 256} {
		c := tinyCritic(t, 1e-3)
		c.vm.Head[0], c.vm.Head[5] = 0.3, -0.2
		c.opt.Config.MaxGradNorm = 0
		v, err := c.valuesBudget(b, 2, budget)
		if err != nil {
			t.Fatal(err)
		}
		vals[k] = v
		_, ret := algo.GAEAdvantages(rewards, v, b.mask, b.B, b.Tr, 1, 1)
		u := criticUpdate{MiniSeqs: 8, Micro: 2, Budget: budget, Epochs: 1, ClipRange: 0.5, AggMode: algo.TokenMean, LR: 1e-3}
		mets, err := c.update(context.Background(), b, v, ret, u)
		if err != nil {
			t.Fatal(err)
		}
		pad[k] = mets["perf/critic_update_padding_frac"]
		got[k] = append(append([]float32(nil), c.vm.Body.Grads.Data...), c.vm.HeadGrad...)
	}
	for i := range vals[0] {
		if math.Abs(float64(vals[0][i]-vals[1][i])) > 1e-5 {
			t.Fatalf("value %d: fixed %v, token budget %v", i, vals[0][i], vals[1][i])
		}
	}
	var worst, scale float64
	for i := range got[0] {
		worst = math.Max(worst, math.Abs(float64(got[0][i]-got[1][i])))
		scale = math.Max(scale, math.Abs(float64(got[0][i])))
	}
	if scale == 0 || worst > 1e-4*scale {
		t.Errorf("fixed and token-budget micro-batches give critic gradients %g apart (largest %g)", worst, scale)
	}
	// packed: only the filler rounding each micro-batch up to 64 rows is padding (0.148 of
	// these short trajectories' rows; 0.432 padded in pairs)
	if !(pad[1] > 0 && pad[0] > 2*pad[1]) {
		t.Errorf("critic update padding: fixed %.3f, packed by budget %.3f", pad[0], pad[1])
	}
	t.Logf("critic update padding fraction: fixed micro-batches of 2 %.3f, packed %.3f; gradients %g apart (largest %g)", pad[0], pad[1], worst, scale)
}
