package trainer

import (
	"fmt"
	"sort"
)

// Micro-batches. With fixed sizes (ppo_micro_batch_size_per_gpu,
// log_prob_micro_batch_size_per_gpu) a mini-batch is cut every micro trajectories in the
// order it comes. With use_dynamic_bsz (veRL's switch) the trajectories of a mini-batch are
// first sorted by length (prompt + response, longest first) and then cut by a token budget
// (ppo_max_token_len_per_gpu, log_prob_max_token_len_per_gpu): a micro-batch takes the next
// trajectory while its padded size (trajectories x the longest one's length rounded up to
// the activation bucket) stays within the budget. Sorting puts sequences of similar length
// together, so little of each micro-batch is padding, and the budget bounds the activation
// memory whatever the lengths.
//
// veRL balances the effective (unpadded) token sums of ceil(total/budget) micro-batches
// (Karmarkar-Karp), because its remove-padding path packs each micro-batch; here a
// micro-batch is computed padded to its longest sequence, so the budget counts padded
// tokens, which is what bounds the memory and compute.
//
// Either way the optimiser step sees the same gradient: the losses of a mini-batch are
// normalised by the mini-batch's global token and sequence counts (algo.PolicyLossConfig
// GlobalTokens, GlobalSeqs), so how a mini-batch is cut changes only the float rounding of
// the accumulation (TestDynamicBszSameGradients).

// span is the trajectories [lo, hi) of a batch; packed: as one packed model batch
// (batchOf.packSeqs), else right padded (batchOf.pack).
type span struct {
	lo, hi int
	packed bool
}

// fixedSpans cuts [lo, hi) every micro trajectories.
func fixedSpans(lo, hi, micro int) []span {
	micro = max(micro, 1)
	var out []span
	for m := lo; m < hi; m += micro {
		out = append(out, span{lo: m, hi: min(m+micro, hi)})
	}
	return out
}

// seqLen is the length of trajectory i: prompt + response tokens.
func (b *batchOf) seqLen(i int) int { return len(b.outs[i].PromptIDs) + len(b.outs[i].ResponseIDs) }

// sortByLength sorts order[lo:hi] (indexes into b) longest first; ties keep their order.
func sortByLength(b *batchOf, order []int, lo, hi int) {
	seg := order[lo:hi]
	sort.SliceStable(seg, func(i, j int) bool { return b.seqLen(seg[i]) > b.seqLen(seg[j]) })
}

// budgetSpans cuts [lo, hi) of b, whose trajectories are sorted longest first, into
// micro-batches of at most budget padded tokens. key names the budget for the error a
// trajectory longer than the budget gives.
func budgetSpans(b *batchOf, lo, hi, budget int, key string) ([]span, error) {
	var out []span
	for m := lo; m < hi; {
		T := bucket(max(b.seqLen(m), 1))
		if T > budget {
			return nil, fmt.Errorf("trainer: %s=%d is smaller than a trajectory of %d tokens (%d once padded to the activation bucket of 64): raise it to at least %d",
				key, budget, b.seqLen(m), T, T)
		}
		n := budget / T // the first is the longest: every later one fits its padding
		e := min(m+n, hi)
		out = append(out, span{lo: m, hi: e})
		m = e
	}
	return out, nil
}

// packedSpans cuts [lo, hi) of b, sorted longest first, into packed micro-batches
// (span.packed): each takes the next trajectory while its tokens, summed and rounded up to the
// activation bucket (what packSeqs computes), stay within budget. key names the budget for
// the error a trajectory longer than the budget gives.
func packedSpans(b *batchOf, lo, hi, budget int, key string) ([]span, error) {
	var out []span
	for m := lo; m < hi; {
		if T := bucket(max(b.seqLen(m), 1)); T > budget {
			return nil, fmt.Errorf("trainer: %s=%d is smaller than a trajectory of %d tokens (%d once rounded up to the activation bucket of 64): raise it to at least %d",
				key, budget, b.seqLen(m), T, T)
		}
		e, n := m, 0
		for e < hi && bucket(n+max(b.seqLen(e), 1)) <= budget {
			n += max(b.seqLen(e), 1)
			e++
		}
		out = append(out, span{lo: m, hi: e, packed: true})
		m = e
	}
	return out, nil
}

// paddingOf sums the real (prompt + response) and the computed tokens of micro-batches:
// trajectories x the micro-batch's padded length, as pack computes it, or the packed tokens
// rounded up to the bucket, as packSeqs does.
func paddingOf(b *batchOf, spans []span) (real, padded int) {
	for _, s := range spans {
		T, sum := 1, 0
		for i := s.lo; i < s.hi; i++ {
			real += b.seqLen(i)
			T = max(T, b.seqLen(i))
			sum += max(b.seqLen(i), 1)
		}
		if s.packed {
			padded += bucket(sum)
		} else {
			padded += (s.hi - s.lo) * bucket(T)
		}
	}
	return real, padded
}

// planLogProbsPacked is planLogProbs with packed micro-batches (packedSpans) when budget > 0:
// the actor's and the reference's log-prob passes.
func planLogProbsPacked(b *batchOf, micro, budget int, key string) (order []int, spans []span, err error) {
	order, spans, err = planLogProbs(b, micro, 0, key)
	if budget <= 0 {
		return order, spans, err
	}
	sortByLength(b, order, 0, b.B)
	spans, err = packedSpans(b.permute(order), 0, b.B, budget, key)
	return order, spans, err
}

// planLogProbs is the order and micro-batches of a log-prob pass over the whole batch:
// identity order and fixed micro-batches, or (budget > 0) length-sorted with a token budget.
func planLogProbs(b *batchOf, micro, budget int, key string) (order []int, spans []span, err error) {
	order = make([]int, b.B)
	for i := range order {
		order[i] = i
	}
	if budget <= 0 {
		return order, fixedSpans(0, b.B, micro), nil
	}
	sortByLength(b, order, 0, b.B)
	spans, err = budgetSpans(b.permute(order), 0, b.B, budget, key)
	return order, spans, err
}
