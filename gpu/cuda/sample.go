package cuda

// Sampling on the device (kernels/sample.cuh): one token per row of logits,
// temperature, top-k, top-p, with each row's uniform draw from the host.
// A call whose every row is greedy, unfiltered or top-k up to 128 (with or
// without top-p) runs the split path, sample_split_max, _sum and _pick
// (splitPlan: each row cut into slices, a block each); the others run
// sample_tokens_hist, which finds the cuts of a row by radix select. On an
// H200 the split path took 0.09 to 0.39 of the radix select's time on rows
// of 151936 ids (0.96 greedy at batch 64), and an H100 proof at b593c0c
// measured the radix select faster than the bisection it replaced,
// sample_tokens, since deleted (docs/bench/history/gpu-experiments.md).
// CPU reference: gpu/cpu/sample.go; the checks are in sample_check.go and
// sample_split_check.go.

import (
	"fmt"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
)

// SampleTokens: tokens [M] and logp [M] (may be nil) from logits [M,V] and
// params [M]. The params go up (24 bytes a row); with host tokens and logp
// the op waits for the stream and downloads 8 bytes a row, nothing else.
func (b *Backend) SampleTokens(tokens []int32, logp []float32, logits []float32, params []gpu.SampleParams, M, V int) {
	if M == 0 {
		return
	}
	if len(tokens) < M || len(params) < M || (logp != nil && len(logp) < M) {
		panic(&Error{"SampleTokens", fmt.Errorf("%d tokens, %d log-probs, %d params for %d rows", len(tokens), len(logp), len(params), M)})
	}
	b.d.run("SampleTokens", func(a *arena) {
		if h := b.d.sampleHook; h != nil && h(a, tokens, logp, logits, params, M, V) {
			return
		}
		if S, SL, KC, ok := splitPlan(params[:M], V); ok {
			pz := a.in(logits, M*V)
			pp := a.stage(unsafe.Pointer(&params[0]), int64(M)*int64(unsafe.Sizeof(params[0])), true, false)
			pt := a.stage(unsafe.Pointer(&tokens[0]), int64(M)*4, false, true)
			b.d.sampleSplit(a, pt, a.out(logp, M), pz, pp, M, V, S, SL, KC)
			return
		}
		b.d.sampleHist(a, tokens, logp, logits, params, M, V)
	})
}

// sampleHist samples a call with sample_tokens_hist, whatever its rows.
func (d *device) sampleHist(a *arena, tokens []int32, logp, logits []float32, params []gpu.SampleParams, M, V int) {
	pz := a.in(logits, M*V)
	pp := a.stage(unsafe.Pointer(&params[0]), int64(M)*int64(unsafe.Sizeof(params[0])), true, false)
	e, cand, sorted := a.alloc(int64(M*V)*4), a.alloc(int64(M*V)*4), a.alloc(int64(M*V)*4)
	pt := a.stage(unsafe.Pointer(&tokens[0]), int64(M)*4, false, true)
	d.launch("sample_tokens_hist", M, ptr(pt), ptr(a.out(logp, M)), ptr(pz), ptr(pp), ptr(e), ptr(cand), ptr(sorted),
		i64(M), i64(V))
}

// The split path's limits (kernels/sample.cuh SS_*) and the ids of a slice
// where the candidates allow it: a flat row of 151936 ids is read by 38
// blocks (top-k up to 107), or by 32 (top-k 128).
const (
	ssSliceMax = 8192
	ssCandMax  = 4096
	ssKMax     = 128
	ssSlice    = 4096
)

// SampleSplits reports whether SampleTokens samples a call of params over a
// vocabulary of V by the split path (splitPlan), not by sample_tokens_hist.
func SampleSplits(params []gpu.SampleParams, V int) bool {
	_, _, _, ok := splitPlan(params, V)
	return ok
}

// splitPlan: how the split path cuts the rows of a call, S slices of SL ids
// and room for KC candidates a slice (the largest top-k of its rows), or
// ok false when a row is one it does not take (top-p alone, top-k above
// ssKMax, or a row too long for ssSliceMax): then the call runs
// sample_tokens_hist.
func splitPlan(params []gpu.SampleParams, V int) (S, SL, KC int, ok bool) {
	for _, p := range params {
		topK := p.TopK > 0 && int(p.TopK) < V
		switch {
		case p.Temperature <= 0: // greedy
		case topK && p.TopK <= ssKMax:
			KC = max(KC, int(p.TopK))
		case !topK && (p.TopP <= 0 || p.TopP >= 1): // unfiltered
		default:
			return 0, 0, 0, false
		}
	}
	S = (V + ssSlice - 1) / ssSlice
	if KC > 0 {
		S = min(S, ssCandMax/KC)
	}
	SL = (V + S - 1) / S
	if SL > ssSliceMax {
		return 0, 0, 0, false
	}
	return (V + SL - 1) / SL, SL, KC, true
}

// sampleSplit launches the split path (kernels/sample.cuh, "Split
// sampling"): the slices' maxima, their sums and candidates, then a block
// a row picks the token; its scratch is O(M*S*KC), not [M,V].
func (d *device) sampleSplit(a *arena, pt, pl, pz, pp dptr, M, V, S, SL, KC int) {
	n := int64(M * S)
	kc := max(KC, 1)
	pmax, pidx, pse := a.alloc(n*4), a.alloc(n*4), a.alloc(n*8)
	ckey, cid, cn := a.alloc(n*int64(kc)*4), a.alloc(n*int64(kc)*4), a.alloc(n*4)
	d.launch("sample_split_max", M*S, ptr(pmax), ptr(pidx), ptr(pz), i64(S), i64(SL), i64(V))
	d.launch("sample_split_sum", M*S, ptr(pse), ptr(ckey), ptr(cid), ptr(cn), ptr(pz), ptr(pmax), ptr(pidx), ptr(pp),
		i64(S), i64(SL), i64(V), i64(kc))
	d.launch("sample_split_pick", M, ptr(pt), ptr(pl), ptr(pz), ptr(pmax), ptr(pidx), ptr(pse), ptr(ckey), ptr(cid),
		ptr(cn), ptr(pp), i64(S), i64(SL), i64(V), i64(kc))
}

// putBack writes n bytes of host memory src to dst: up to the device where
// dst is a tensor's host slice, into dst itself otherwise.
func (d *device) putBack(dst, src unsafe.Pointer, n int64) {
	if p, t := d.mem.find(dst, n); t != nil {
		must(d.htod(p, src, n))
		return
	}
	copy(unsafe.Slice((*byte)(dst), n), unsafe.Slice((*byte)(src), n))
}
