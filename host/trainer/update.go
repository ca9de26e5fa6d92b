package trainer

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/rollout"
)

// updateActor trains the actor on the step's advantages (ppoUpdate), from step
// trainer.critic_warmup on (veRL: the actor updates when critic_warmup <= step).
func (t *Trainer) updateActor(ctx context.Context, s *stepState) (map[string]float64, error) {
	if t.cfg.Trainer.CriticWarmup > s.step {
		return nil, nil
	}
	start, dev := time.Now(), s.dev.phaseStart()
	vals, err := t.ppoUpdate(ctx, s.b, s.adv, s.oldLogp, s.refLogp, s.step)
	if err != nil {
		return nil, err
	}
	wall := time.Since(start)
	vals[timingUpdateActor] = wall.Seconds()
	dev.addTo(vals, perfUpdateDeviceWait, perfUpdateHostFrac, wall)
	dev.enqueueTo(vals, perfUpdateEnqueueTime)
	return vals, nil
}

// actorUpdate is one update of the actor (ppoUpdate) as its mini-batches share it: the batch
// in the order of the current epoch, the loss's settings, and the sums of the metrics.
type actorUpdate struct {
	b             *batchOf  // the batch in the epoch's order
	adv, old, ref []float32 // [B*Tr] in that order; old and ref nil when not computed
	ac            config.Actor
	policy        algo.PolicyLossConfig
	agg           algo.Agg
	miniSeqs      int
	realTok       int // rows of the forward/backward passes that held a token
	padTok        int // all their rows
	sums, counts  map[string]float64
}

// ppoUpdate runs the PPO epochs (actor.ppo_epochs): mini-batches of ppo_mini_batch_size*n
// trajectories, each an optimiser step over micro-batches of ppo_micro_batch_size_per_gpu (or
// of a token budget, actor.use_dynamic_bsz) with gradient accumulation, in a shuffled order
// per epoch with actor.shuffle. It returns the means of the update's metrics.
func (t *Trainer) ppoUpdate(ctx context.Context, b *batchOf, adv, oldLogp, refLogp []float32, step int) (map[string]float64, error) {
	cfg := t.cfg
	ac := cfg.ActorRolloutRef.Actor
	t.opt.Config.LR = float32(lrSchedule(ac.Optim, t.totalSteps).At(step, t.totalSteps))
	p := &actorUpdate{b: b, adv: adv, old: oldLogp, ref: refLogp, ac: ac,
		policy: algo.PolicyLossConfig{ClipLow: cfg.ClipRatioLow(), ClipHigh: cfg.ClipRatioHigh(), ClipC: ac.ClipRatioC,
			AggMode: ac.LossAggMode, NormLen: cfg.ResponseLength()},
		agg:      algo.Agg{Mode: ac.LossAggMode, NormLen: cfg.ResponseLength()},
		miniSeqs: max(ac.PPOMiniBatchSize*cfg.ActorRolloutRef.Rollout.N, 1),
		sums:     map[string]float64{}, counts: map[string]float64{}}
	var err error
	if p.miniSeqs, err = t.dp.localMini(p.miniSeqs); err != nil {
		return nil, err
	}
	order := make([]int, b.B)
	for i := range order {
		order[i] = i
	}
	for epoch := 0; epoch < max(ac.PPOEpochs, 1); epoch++ {
		if ac.Shuffle {
			r := rand.New(rand.NewPCG(uint64(cfg.Trainer.Seed), uint64(step*1000+epoch)))
			r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		if ac.UseDynamicBsz {
			// The same mini-batches, each sorted longest first for the token budget.
			for lo := 0; lo < b.B; lo += p.miniSeqs {
				sortByLength(b, order, lo, min(lo+p.miniSeqs, b.B))
			}
		}
		if ac.Shuffle || ac.UseDynamicBsz {
			// A permuted batch: trajectories of a mini-batch must be contiguous for pack/extract.
			p.b = b.permute(order)
			p.adv, p.old, p.ref = permuteRows(adv, order, b.Tr), permuteRows(oldLogp, order, b.Tr), permuteRows(refLogp, order, b.Tr)
		}
		for lo := 0; lo < p.b.B; lo += p.miniSeqs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			if err := t.actorMiniBatch(ctx, p, lo, min(lo+p.miniSeqs, p.b.B)); err != nil {
				return nil, err
			}
		}
	}
	if err := t.dp.sums(ctx, p.sums, p.counts, &p.realTok, &p.padTok); err != nil {
		return nil, err
	}
	out := map[string]float64{actorLR: float64(t.opt.Config.LR)}
	if p.padTok > 0 {
		// The share of the update's forward/backward rows that were padding.
		out[perfUpdatePaddingFrac] = 1 - float64(p.realTok)/float64(p.padTok)
	}
	for k, v := range p.sums {
		out[k] = v / p.counts[k]
	}
	return out, nil
}

// add adds a value to the mean of metric k over the update.
func (p *actorUpdate) add(k string, v float64) { p.sums[k] += v; p.counts[k]++ }

// actorMiniBatch is one optimiser step over trajectories [lo, hi) of p.b: the gradient of their
// loss accumulated over micro-batches, the loss aggregated over the whole mini-batch (its
// token and sequence counts), then AdamW.
func (t *Trainer) actorMiniBatch(ctx context.Context, p *actorUpdate, lo, hi int) error {
	b := p.b
	spans := fixedSpans(lo, hi, max(p.ac.PPOMicroBatchSizePerGPU, 1))
	if p.ac.UseDynamicBsz {
		var err error
		if spans, err = packedSpans(b, lo, hi, p.ac.PPOMaxTokenLenPerGPU, "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"); err != nil {
			return err
		}
	}
	re, pa := paddingOf(b, spans)
	p.realTok += re
	p.padTok += pa
	p.add(actorMicroBatches, float64(len(spans)))
	gTok, gSeq := maskCounts(b.rows(b.mask, lo, hi), b.Tr)
	gTok, gSeq, err := t.dp.counts(ctx, gTok, gSeq)
	if err != nil {
		return err
	}
	pc, ag := p.policy, p.agg
	pc.GlobalTokens, pc.GlobalSeqs = gTok, gSeq
	ag.GlobalTokens, ag.GlobalSeqs = gTok, gSeq
	t.actor.ZeroGrads()
	for _, sp := range spans {
		if err := t.actorMicroBatch(p, sp, pc, ag); err != nil {
			return err
		}
	}
	norm, err := t.dp.step(ctx, t.actor, t.opt)
	if err != nil {
		return err
	}
	if math.IsNaN(norm) || math.IsInf(norm, 0) {
		return fmt.Errorf("trainer: gradient norm is %v: the update was not finite", norm)
	}
	p.add(actorGradNorm, norm)
	return nil
}

// actorMicroBatch runs the forward and backward of micro-batch sp, accumulating the gradient of
// its part of the mini-batch's loss: the clipped policy loss, less actor.entropy_coeff times
// the entropy, plus actor.kl_loss_coef times the KL to the reference (actor.use_kl_loss).
func (t *Trainer) actorMicroBatch(p *actorUpdate, sp span, pc algo.PolicyLossConfig, ag algo.Agg) error {
	b := p.b
	lo, hi := sp.lo, sp.hi
	Bm := hi - lo
	mb, lay := b.microBatch(sp)
	a := t.acts.For(mb)
	if err := t.actor.Forward(a, mb); err != nil {
		return fmt.Errorf("trainer: forward: %w", err)
	}
	logp := make([]float32, Bm*b.Tr)
	ent := make([]float32, Bm*b.Tr)
	b.extract(logp, a.Logp, lay, lo, hi)
	b.extract(ent, a.Entropy, lay, lo, hi)
	mask := b.rows(b.mask, lo, hi)
	old := logp
	if p.old != nil {
		old = b.rows(p.old, lo, hi)
	}
	pl := algo.PolicyLoss(logp, old, b.rows(p.adv, lo, hi), mask, Bm, b.Tr, pc)
	dlogp := pl.DLogp
	p.add(actorPGLoss, pl.Loss)
	p.add(actorPPOKL, pl.PPOKL)
	p.add(actorPGClipfrac, pl.ClipFrac)
	p.add(actorPGClipfracLower, pl.ClipFracLower)
	_, _, dEnt := algo.EntropyBonus(ent, mask, Bm, b.Tr, p.ac.EntropyCoeff, ag)
	p.add(actorEntropy, algo.MaskedMean(ent, mask))
	if p.ac.UseKLLoss && p.ref != nil {
		klLoss, _, dKL := algo.KLLoss(logp, b.rows(p.ref, lo, hi), mask, Bm, b.Tr, p.ac.KLLossType, p.ac.KLLossCoef, ag)
		p.add(actorKLLoss, klLoss)
		p.add(actorKLCoef, p.ac.KLLossCoef)
		for i := range dlogp {
			dlogp[i] += dKL[i]
		}
	}
	rowsD := make([]float32, mb.B*mb.T)
	rowsE := make([]float32, mb.B*mb.T)
	b.scatter(rowsD, dlogp, lay, lo, hi)
	b.scatter(rowsE, dEnt, lay, lo, hi)
	if err := t.actor.Backward(a, rowsD, rowsE); err != nil {
		return fmt.Errorf("trainer: backward: %w", err)
	}
	return nil
}

// permute returns the batch with its trajectories in the given order.
func (b *batchOf) permute(order []int) *batchOf {
	outs := make([]*rollout.Output, len(order))
	for i, j := range order {
		outs[i] = b.outs[j]
	}
	nb := newBatch(outs)
	nb.Tr = b.Tr
	nb.mask = permuteRows(b.mask, order, b.Tr)
	return nb
}

func permuteRows(x []float32, order []int, Tr int) []float32 {
	if x == nil {
		return nil
	}
	out := make([]float32, len(x))
	for i, j := range order {
		copy(out[i*Tr:(i+1)*Tr], x[j*Tr:(j+1)*Tr])
	}
	return out
}
