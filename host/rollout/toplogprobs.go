package rollout

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/rlhost/rlhost/gpu/model"
)

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	ID      int
	Logprob float32
}

// TopLogprober is a Policy that can list, at each position of a completion, the k most likely
// tokens (OpenAI's top_logprobs).
type TopLogprober interface {
	// TopLogprobs returns, for each completion token, the k most likely tokens at its position
	// (most likely first) under log_softmax(logits / temperature) — the distribution the
	// policy's Generation.Logprobs refer to; temperature <= 0 means the raw logits.
	TopLogprobs(ctx context.Context, prompt, completion []int, k int, temperature float64) ([][]TokenLogprob, error)
}

// TopLogprobs implements TopLogprober with one forward of prompt + completion (the lm_head
// only at the completion's positions), run between generate batches.
func (p *ModelPolicy) TopLogprobs(ctx context.Context, prompt, completion []int, k int, temperature float64) ([][]TokenLogprob, error) {
	if len(completion) == 0 || k <= 0 {
		return make([][]TokenLogprob, len(completion)), nil
	}
	if len(prompt) == 0 {
		return nil, fmt.Errorf("rollout: top log-probs: empty prompt")
	}
	T := len(prompt) + len(completion) - 1 // the last token is only a target
	b := model.Batch{B: 1, T: T, Tokens: make([]int32, T), Targets: make([]int32, T), ScoredOnly: true}
	seq := append(slices.Clone(prompt), completion...)
	for i := range T {
		b.Tokens[i] = int32(seq[i])
		b.Targets[i] = -1
		if i >= len(prompt)-1 {
			b.Targets[i] = int32(seq[i+1])
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	p.lockModel()
	defer p.unlockModel()
	a := p.m.NewActs(1, T)
	defer a.Free()
	if err := p.m.Forward(a, b); err != nil {
		return nil, fmt.Errorf("rollout: top log-probs: %w", err)
	}
	V := p.m.Config.V
	temp := temperature
	if temp <= 0 {
		temp = 1
	}
	k = min(k, V)
	out := make([][]TokenLogprob, len(completion))
	idx := make([]int, V)
	logits := make([]float32, len(completion)*V) // the rows read here, from the backend
	p.m.Backend().Download(logits, a.Logits[:len(logits)])
	for j := range completion {
		row := logits[j*V : (j+1)*V]
		m := row[0]
		for _, z := range row {
			m = max(m, z)
		}
		var se float64
		for _, z := range row {
			se += math.Exp(float64(z-m) / temp)
		}
		lse := math.Log(se)
		for i := range idx {
			idx[i] = i
		}
		// partial selection of the k largest logits (ties: lower id first)
		less := func(x, y int) bool { return row[x] > row[y] || row[x] == row[y] && x < y }
		top := idx[:0:0]
		for _, i := range idx {
			if len(top) < k {
				top = append(top, i)
				for q := len(top) - 1; q > 0 && less(top[q], top[q-1]); q-- {
					top[q], top[q-1] = top[q-1], top[q]
				}
				continue
			}
			if less(i, top[k-1]) {
				top[k-1] = i
				for q := k - 1; q > 0 && less(top[q], top[q-1]); q-- {
					top[q], top[q-1] = top[q-1], top[q]
				}
			}
		}
		out[j] = make([]TokenLogprob, len(top))
		for q, i := range top {
			out[j][q] = TokenLogprob{ID: i, Logprob: float32(float64(row[i]-m)/temp - lse)}
		}
	}
	return out, nil
}
