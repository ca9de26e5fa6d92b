package trainer

import (
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/host/rollout"
)

// Shape letters: B trajectories of a step, Tr the longest response of the step, T the padded
// length (prompt + response) of one micro-batch. Per-token arrays of the algorithms are
// [B*Tr] over response tokens; the model works on [Bm*T] rows of a micro-batch.

// batchOf is the step's trajectories laid out for the algorithms.
type batchOf struct {
	outs  []*rollout.Output
	B, Tr int
	mask  []float32 // [B*Tr] 1 = model token
}

func newBatch(outs []*rollout.Output) *batchOf {
	b := &batchOf{outs: outs, B: len(outs)}
	for _, o := range outs {
		b.Tr = max(b.Tr, len(o.ResponseIDs))
	}
	b.Tr = max(b.Tr, 1)
	b.mask = make([]float32, b.B*b.Tr)
	for i, o := range outs {
		copy(b.mask[i*b.Tr:], o.ResponseMask)
	}
	return b
}

// rows returns the sub-slice of a [B*Tr] array for trajectories [lo, hi).
func (b *batchOf) rows(x []float32, lo, hi int) []float32 { return x[lo*b.Tr : hi*b.Tr] }

// bucket rounds a sequence length up, so that a few activation shapes serve every micro-batch.
func bucket(n int) int {
	const q = 64
	return (n + q - 1) / q * q
}

// rowLayout says where the trajectories of a micro-batch lie in the model's rows:
// trajectory lo+i starts at row start[i] and its prompt is plen[i] tokens long.
type rowLayout struct{ start, plen []int }

// microBatch is the model batch of span s: packed (packSeqs) or right padded (pack).
func (b *batchOf) microBatch(s span) (model.Batch, rowLayout) {
	if s.packed {
		return b.packSeqs(s.lo, s.hi)
	}
	return b.pack(s.lo, s.hi)
}

// pack builds the model batch of trajectories [lo, hi): prompt and response tokens, right
// padded; the target of row (b, P+j-1) is response token j where it is a model token, -1
// elsewhere (prompt, observation tokens, padding). Only rows with a target are scored: the
// lm_head and log-softmax skip the prompt, observation and padding rows, whose log-probs and
// entropies no loss or metric reads.
func (b *batchOf) pack(lo, hi int) (model.Batch, rowLayout) {
	Bm := hi - lo
	T := 1
	for _, o := range b.outs[lo:hi] {
		T = max(T, len(o.PromptIDs)+len(o.ResponseIDs))
	}
	T = bucket(T)
	mb := model.Batch{B: Bm, T: T, Tokens: make([]int32, Bm*T), Targets: make([]int32, Bm*T), ScoredOnly: true}
	for i := range mb.Targets {
		mb.Targets[i] = -1
	}
	lay := rowLayout{start: make([]int, Bm), plen: make([]int, Bm)}
	for i := range lay.start {
		lay.start[i] = i * T
	}
	b.fill(mb, lay, lo, hi)
	return mb, lay
}

// packSeqs builds the packed model batch of trajectories [lo, hi) (model.Batch.Lengths):
// their prompt and response tokens end to end, no padding between them, targets as in
// pack. The rows are rounded up to the activation bucket by a last filler sequence (token 0,
// no target), so that a few activation sizes serve every micro-batch.
func (b *batchOf) packSeqs(lo, hi int) (model.Batch, rowLayout) {
	lay := rowLayout{start: make([]int, hi-lo), plen: make([]int, hi-lo)}
	var lengths []int
	N := 0
	for i := lo; i < hi; i++ {
		lay.start[i-lo] = N
		n := max(b.seqLen(i), 1)
		lengths = append(lengths, n)
		N += n
	}
	if T := bucket(N); T > N {
		lengths = append(lengths, T-N)
		N = T
	}
	mb := model.Batch{B: 1, T: N, Tokens: make([]int32, N), Targets: make([]int32, N), ScoredOnly: true, Lengths: lengths}
	for i := range mb.Targets {
		mb.Targets[i] = -1
	}
	b.fill(mb, lay, lo, hi)
	return mb, lay
}

// fill writes the tokens and targets of trajectories [lo, hi) at the rows of lay (and
// records their prompt lengths there).
func (b *batchOf) fill(mb model.Batch, lay rowLayout, lo, hi int) {
	for i, o := range b.outs[lo:hi] {
		P := len(o.PromptIDs)
		lay.plen[i] = P
		s := lay.start[i]
		for t, id := range o.PromptIDs {
			mb.Tokens[s+t] = int32(id)
		}
		for j, id := range o.ResponseIDs {
			mb.Tokens[s+P+j] = int32(id)
			if o.ResponseMask[j] != 0 {
				mb.Targets[s+P+j-1] = int32(id)
			}
		}
	}
}

// extract copies the model's per-row values (a.Logp or a.Entropy, one per model row) of the
// response model tokens of [lo, hi), laid out as lay, into dst [(hi-lo)*Tr].
func (b *batchOf) extract(dst, rowsVals []float32, lay rowLayout, lo, hi int) {
	for i := range dst {
		dst[i] = 0
	}
	for i, o := range b.outs[lo:hi] {
		r := lay.start[i] + lay.plen[i] - 1
		for j := range o.ResponseIDs {
			if o.ResponseMask[j] != 0 {
				dst[i*b.Tr+j] = rowsVals[r+j]
			}
		}
	}
}

// scatter is the inverse of extract: per-token gradients [(hi-lo)*Tr] to the model rows
// (dst, one per row; the others 0).
func (b *batchOf) scatter(dst, tokVals []float32, lay rowLayout, lo, hi int) {
	for i := range dst {
		dst[i] = 0
	}
	for i, o := range b.outs[lo:hi] {
		r := lay.start[i] + lay.plen[i] - 1
		for j := range o.ResponseIDs {
			if o.ResponseMask[j] != 0 {
				dst[r+j] = tokVals[i*b.Tr+j]
			}
		}
	}
}
