package sft

import (
	"fmt"
	"math"

	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/host/algo"
)

// Shape letters: Bm sequences of a micro-batch, T their padded length (a multiple of 64), N =
// Bm*T model rows. Row n = b*T+t predicts token t+1 of sequence b.

// bucket rounds a sequence length up, so that a few activation shapes serve every batch.
func bucket(n int) int {
	const q = 64
	return (n + q - 1) / q * q
}

// pack lays out examples as a right-padded model batch: the target of row (b, t) is token
// t+1 where that token is a model token, -1 elsewhere (prompt, observations, padding), so
// only the assistant tokens are scored.
func pack(exs []*Example, maxPos int) model.Batch {
	T := 1
	for _, e := range exs {
		T = max(T, len(e.IDs))
	}
	T = min(bucket(T), max(maxPos, T))
	b := model.Batch{B: len(exs), T: T, Tokens: make([]int32, len(exs)*T), Targets: make([]int32, len(exs)*T), ScoredOnly: true}
	for i := range b.Targets {
		b.Targets[i] = -1
	}
	for i, e := range exs {
		copy(b.Tokens[i*T:], e.IDs)
		for t := 1; t < len(e.IDs); t++ {
			if e.Mask[t] {
				b.Targets[i*T+t-1] = e.IDs[t]
			}
		}
	}
	return b
}

// lossTokens counts the scored tokens of examples.
func lossTokens(exs []*Example) int {
	n := 0
	for _, e := range exs {
		n += e.LossTokens()
	}
	return n
}

// StepResult is what one SFT step computed.
type StepResult struct {
	Loss       float64 // token-mean negative log-likelihood over the step's assistant tokens
	Tokens     int     // assistant tokens (the loss is their mean)
	AllTokens  int     // every token of the step's sequences
	TokenLoss  [][]float32
	Sequences  int
	MicroSteps int
}

// accumulate runs the forward and backward of one batch of examples in micro-batches of
// micro sequences, accumulating into the model's gradients the gradient of the token-mean
// cross-entropy over all the batch's assistant tokens (normalised by the batch's token count,
// not per micro-batch, so the gradient does not depend on the micro-batch size). With
// keepTokenLoss the per-token losses (-log p of each target, 0 elsewhere, [len(IDs)] per
// example, at the position of the token predicted) are returned too.
func accumulate(m *model.Model, acts *model.ActsCache, exs []*Example, micro int, backward, keepTokenLoss bool) (StepResult, error) {
	res := StepResult{Tokens: lossTokens(exs), Sequences: len(exs)}
	if res.Tokens == 0 {
		return res, fmt.Errorf("sft: the batch has no assistant tokens")
	}
	scale := float32(1 / float64(res.Tokens))
	var sum float64
	for lo := 0; lo < len(exs); lo += micro {
		hi := min(lo+micro, len(exs))
		mb := pack(exs[lo:hi], m.Config.MaxPos)
		a := acts.Get(mb.B, mb.T)
		if err := m.Forward(a, mb); err != nil {
			return res, fmt.Errorf("sft: forward: %w", err)
		}
		res.MicroSteps++
		dlogp := make([]float32, mb.B*mb.T)
		for n, tg := range mb.Targets {
			if tg >= 0 {
				sum -= float64(a.Logp[n])
				dlogp[n] = -scale
			}
		}
		for i, e := range exs[lo:hi] {
			res.AllTokens += len(e.IDs)
			if keepTokenLoss {
				tl := make([]float32, len(e.IDs))
				for t := 1; t < len(e.IDs); t++ {
					if e.Mask[t] {
						tl[t] = -a.Logp[i*mb.T+t-1]
					}
				}
				res.TokenLoss = append(res.TokenLoss, tl)
			}
		}
		if backward {
			if err := m.Backward(a, dlogp, make([]float32, mb.B*mb.T)); err != nil {
				return res, fmt.Errorf("sft: backward: %w", err)
			}
		}
	}
	res.Loss = sum / float64(res.Tokens)
	if math.IsNaN(res.Loss) || math.IsInf(res.Loss, 0) {
		return res, fmt.Errorf("sft: the loss is %v", res.Loss)
	}
	return res, nil
}

// lrSchedule is the optim section's learning-rate schedule over a run of total optimiser
// steps: linear warm-up over int(warmup_steps_ratio*total) steps, then cosine decay to
// min_lr_ratio*lr (lr_scheduler=cosine) or constant — the schedule rlhost train uses for the
// actor.
func lrSchedule(o OptimConfig, total int) algo.LRSchedule {
	return algo.LRSchedule{LR: o.LR, WarmupSteps: int(o.WarmupStepsRatio * float64(total)), Cosine: o.LRScheduler == "cosine",
		MinLRRatio: o.MinLRRatio}
}
