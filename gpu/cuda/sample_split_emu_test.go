//go:build cudaemu && !cuda

package cuda

// The sample_split variant of dev/cuda on the emulator: its launcher (the
// product has none: the variant waits for a GPU proof, docs/gpu.md) and
// the switch that puts it in SampleTokens' path for the calls it takes.

import (
	"testing"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
)

// The split path's limits (dev/cuda/sample_split.cuh SS_*) and the ids of a slice
// where the candidates allow it: a flat row of 151936 ids is read by 38
// blocks (top-k up to 107), or by 32 (top-k 128).
const (
	ssSliceMax = 8192
	ssCandMax  = 4096
	ssKMax     = 128
	ssSlice    = 4096
)

// splitPlan: how sample_split cuts the rows of a call, S slices of SL ids
// and room for KC candidates a slice (the largest top-k of its rows), or
// ok false when a row is one it does not take (top-p alone, top-k above
// ssKMax, or a row too long for ssSliceMax): then the call runs the
// default kernel.
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

// sampleSplit launches the split path (dev/cuda/sample_split.cuh, the
// builds sample_split/max, /sum and /pick): the slices' maxima, their sums
// and candidates, then a block a row picks the token; its scratch is
// O(M*S*KC), not [M,V].
func (d *device) sampleSplit(a *arena, pt, pl, pz, pp dptr, M, V, S, SL, KC int) {
	n := int64(M * S)
	kc := max(KC, 1)
	pmax, pidx, pse := a.alloc(n*4), a.alloc(n*4), a.alloc(n*8)
	ckey, cid, cn := a.alloc(n*int64(kc)*4), a.alloc(n*int64(kc)*4), a.alloc(n*4)
	d.launch(splitKernels[0], M*S, ptr(pmax), ptr(pidx), ptr(pz), i64(S), i64(SL), i64(V))
	d.launch(splitKernels[1], M*S, ptr(pse), ptr(ckey), ptr(cid), ptr(cn), ptr(pz), ptr(pmax), ptr(pidx), ptr(pp),
		i64(S), i64(SL), i64(V), i64(kc))
	d.launch(splitKernels[2], M, ptr(pt), ptr(pl), ptr(pz), ptr(pmax), ptr(pidx), ptr(pse), ptr(ckey), ptr(cid),
		ptr(cn), ptr(pp), i64(S), i64(SL), i64(V), i64(kc))
}

// splitKernels are the builds sampleSplit launches: the variant's three
// kernels, or planted defects of them (SplitKernels).
var splitKernels = [3]string{"sample_split/max", "sample_split/sum", "sample_split/pick"}

// SplitKernels makes sampleSplit launch the builds named sample_split/max,
// sample_split/sum and sample_split/pick (a planted defect of one of them,
// e.g. "sum_tie") until restore is called.
func SplitKernels(max, sum, pick string) (restore func()) {
	was := splitKernels
	splitKernels = [3]string{"sample_split/" + max, "sample_split/" + sum, "sample_split/" + pick}
	return func() { splitKernels = was }
}

// SampleSplitTakes is splitPlan's verdict: whether the sample_split
// variant takes a call of params over a vocabulary of V.
func SampleSplitTakes(params []gpu.SampleParams, V int) bool {
	_, _, _, ok := splitPlan(params, V)
	return ok
}

// SampleSplitOn turns the sample_split variant on (or off) on be: a call
// whose rows it takes (splitPlan) runs its three kernels, the others the
// default kernel. It is a cudacheck.Variant.
func SampleSplitOn(be *Backend) func(on bool) {
	return func(on bool) {
		if !on {
			be.d.sampleHook = nil
			return
		}
		be.d.sampleHook = func(a *arena, tokens []int32, logp, logits []float32, params []gpu.SampleParams, M, V int) bool {
			S, SL, KC, ok := splitPlan(params[:M], V)
			if !ok {
				return false
			}
			pz := a.in(logits, M*V)
			pp := a.stage(unsafe.Pointer(&params[0]), int64(M)*int64(unsafe.Sizeof(params[0])), true, false)
			pt := a.stage(unsafe.Pointer(&tokens[0]), int64(M)*4, false, true)
			be.d.sampleSplit(a, pt, a.out(logp, M), pz, pp, M, V, S, SL, KC)
			return true
		}
	}
}

// TestSplitPlan: the slices the split path cuts a call's rows into, and
// the rows it leaves to the default kernel.
func TestSplitPlan(t *testing.T) {
	greedy, plain := gpu.SampleParams{}, gpu.SampleParams{Temperature: 1}
	k50p := gpu.SampleParams{Temperature: 1, TopK: 50, TopP: 0.95}
	k128 := gpu.SampleParams{Temperature: 1, TopK: 128}
	for _, c := range []struct {
		params    []gpu.SampleParams
		V         int
		S, SL, KC int
		ok        bool
		what      string
	}{
		{[]gpu.SampleParams{greedy, plain}, 151936, 38, 3999, 0, true, "greedy and unfiltered: slices of 4096 at most"},
		{[]gpu.SampleParams{plain, k50p}, 151936, 38, 3999, 50, true, "top-k 50: 38 x 50 candidates fit"},
		{[]gpu.SampleParams{k128, greedy}, 151936, 32, 4748, 128, true, "top-k 128: 32 slices, 4096 candidates"},
		{[]gpu.SampleParams{plain}, 97, 1, 97, 0, true, "one slice"},
		{[]gpu.SampleParams{{Temperature: 1, TopK: 97}}, 97, 1, 97, 0, true, "top-k >= V is unfiltered"},
		{[]gpu.SampleParams{plain, {Temperature: 1, TopP: 0.9}}, 151936, 0, 0, 0, false, "top-p alone"},
		{[]gpu.SampleParams{{Temperature: 1, TopK: 129}}, 151936, 0, 0, 0, false, "top-k above 128"},
		{[]gpu.SampleParams{{Temperature: 1, TopK: 200, TopP: 0.5}}, 151936, 0, 0, 0, false, "top-k above 128 with top-p"},
		{[]gpu.SampleParams{k128}, 300000, 0, 0, 0, false, "slices over 8192 ids"},
		{[]gpu.SampleParams{{Temperature: 0, TopP: 0.5}}, 151936, 38, 3999, 0, true, "greedy ignores top-p"},
	} {
		S, SL, KC, ok := splitPlan(c.params, c.V)
		if ok != c.ok || (ok && (S != c.S || SL != c.SL || KC != c.KC)) {
			t.Errorf("%s: splitPlan = %d %d %d %v, want %d %d %d %v", c.what, S, SL, KC, ok, c.S, c.SL, c.KC, c.ok)
		}
		if ok && ((S-1)*SL >= c.V || S*SL < c.V || S*max(KC, 1) > ssCandMax || SL > ssSliceMax) {
			t.Errorf("%s: %d slices of %d ids, %d candidates each, for V %d", c.what, S, SL, KC, c.V)
		}
	}
}
