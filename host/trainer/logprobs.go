package trainer

import (
	"context"
	"fmt"
	"time"

	"github.com/rlhost/rlhost/gpu/model"
)

// oldLogProbs computes the policy's log-probs of the response tokens before the update
// (s.oldLogp), in micro-batches of rollout.log_prob_micro_batch_size_per_gpu (or by token
// budget). They are skipped when the update is exactly on-policy (one PPO epoch over one
// mini-batch: old and current log-probs are the same numbers, and the ratio is then 1 with the
// right gradient, as in veRL) and no KL in the reward needs them.
func (t *Trainer) oldLogProbs(_ context.Context, s *stepState) (map[string]float64, error) {
	cfg := t.cfg
	miniSeqs := cfg.ActorRolloutRef.Actor.PPOMiniBatchSize * cfg.ActorRolloutRef.Rollout.N
	onPolicy := cfg.ActorRolloutRef.Actor.PPOEpochs == 1 && miniSeqs >= s.b.B
	if onPolicy && !cfg.Algorithm.UseKLInReward {
		return nil, nil
	}
	start := time.Now()
	budget, key := cfg.LogProbBudget(false)
	order, spans, err := planLogProbsPacked(s.b, max(cfg.ActorRolloutRef.Rollout.LogProbMicroBatchSizePerGPU, 1), budget, key)
	if err != nil {
		return nil, err
	}
	if s.oldLogp, _, err = s.b.logProbsIn(t.actor, t.acts, order, spans); err != nil {
		return nil, err
	}
	return map[string]float64{timingOldLogProb: time.Since(start).Seconds()}, nil
}

// refLogProbs computes the reference policy's log-probs (s.refLogp) when a KL term needs them
// (actor.use_kl_loss, algorithm.use_kl_in_reward): with LoRA the actor with its adapters off,
// else a frozen copy of the initial weights.
func (t *Trainer) refLogProbs(_ context.Context, s *stepState) (map[string]float64, error) {
	if t.ref == nil {
		return nil, nil
	}
	cfg := t.cfg
	start := time.Now()
	lora := t.ref == t.actor
	if lora {
		t.actor.SetAdaptersActive(false)
	}
	budget, key := cfg.LogProbBudget(true)
	order, spans, err := planLogProbsPacked(s.b, max(cfg.ActorRolloutRef.Ref.LogProbMicroBatchSizePerGPU, 1), budget, key)
	if err == nil {
		s.refLogp, _, err = s.b.logProbsIn(t.ref, t.refActs, order, spans)
	}
	if lora {
		t.actor.SetAdaptersActive(true)
	}
	if err != nil {
		return nil, err
	}
	return map[string]float64{timingRef: time.Since(start).Seconds()}, nil
}

// logProbs runs the model forward over the batch in micro-batches of micro trajectories and
// returns the log-probs (and entropies) of the response model tokens, [B*Tr].
func (b *batchOf) logProbs(m *model.Model, cache *model.ActsCache, micro int) (logp, entropy []float32, err error) {
	order, spans, _ := planLogProbs(b, micro, 0, "")
	return b.logProbsIn(m, cache, order, spans)
}

// logProbsIn is logProbs over the micro-batches spans of the batch in the given order
// (planLogProbs); the results are in the batch's own order.
func (b *batchOf) logProbsIn(m *model.Model, cache *model.ActsCache, order []int, spans []span) (logp, entropy []float32, err error) {
	pb := b
	if !isIdentity(order) {
		pb = b.permute(order)
	}
	plogp := make([]float32, b.B*b.Tr)
	pent := make([]float32, b.B*b.Tr)
	for _, s := range spans {
		lo, hi := s.lo, s.hi
		mb, lay := pb.microBatch(s)
		a := cache.For(mb)
		if err := m.Forward(a, mb); err != nil {
			return nil, nil, fmt.Errorf("trainer: forward: %w", err)
		}
		pb.extract(pb.rows(plogp, lo, hi), a.Logp, lay, lo, hi)
		pb.extract(pb.rows(pent, lo, hi), a.Entropy, lay, lo, hi)
	}
	if pb == b {
		return plogp, pent, nil
	}
	logp = make([]float32, b.B*b.Tr)
	entropy = make([]float32, b.B*b.Tr)
	for i, j := range order {
		copy(logp[j*b.Tr:(j+1)*b.Tr], plogp[i*b.Tr:(i+1)*b.Tr])
		copy(entropy[j*b.Tr:(j+1)*b.Tr], pent[i*b.Tr:(i+1)*b.Tr])
	}
	return logp, entropy, nil
}

func isIdentity(order []int) bool {
	for i, j := range order {
		if i != j {
			return false
		}
	}
	return true
}
