package cpu

/*
#cgo LDFLAGS: -lm
#include "kernels.h"
*/
import "C"

import "unsafe"

// haveAVX2 says whether the vectorised kernels of kernels.c can run here
// (AVX2 and FMA); without them the Go loops of this package do the work.
var haveAVX2 = C.rl_have_avx2() != 0

// useAVX512Attention selects the AVX-512 build of the cached attention
// (HD a multiple of 16) over the AVX2 one; the tests compare the two.
var useAVX512Attention = haveAVX2 && C.rl_have_avx512() != 0

// useKernels selects the kernels of kernels.c over the Go loops; the tests
// switch it off to compare the two.
var useKernels = haveAVX2

func fptr(x []float32) *C.float { return (*C.float)(unsafe.Pointer(unsafe.SliceData(x))) }

func iptr(x []int32) *C.int32_t { return (*C.int32_t)(unsafe.Pointer(unsafe.SliceData(x))) }

func swigluFwdC(out, gate, up []float32) {
	n := len(out)
	if n == 0 {
		return
	}
	_, _ = gate[n-1], up[n-1]
	C.rl_swiglu_fwd(fptr(out), fptr(gate), fptr(up), C.long(n))
}

// swigluFwdPool is swigluFwdC over parts threads of the C pool (pool.c).
func swigluFwdPool(parts int, out, gate, up []float32) {
	n := len(out)
	if n == 0 {
		return
	}
	_, _ = gate[n-1], up[n-1]
	C.rl_swiglu_fwd_mt(C.int(parts), fptr(out), fptr(gate), fptr(up), C.long(n))
}

func swigluBwdC(dgate, dup, dout, gate, up []float32) {
	n := len(dgate)
	if n == 0 {
		return
	}
	_, _, _, _ = dup[n-1], dout[n-1], gate[n-1], up[n-1]
	C.rl_swiglu_bwd(fptr(dgate), fptr(dup), fptr(dout), fptr(gate), fptr(up), C.long(n))
}

func swigluBwdHC(dgate, dup, h, dout, gate, up []float32) {
	n := len(dgate)
	if n == 0 {
		return
	}
	_, _, _, _, _ = dup[n-1], h[n-1], dout[n-1], gate[n-1], up[n-1]
	C.rl_swiglu_bwd_h(fptr(dgate), fptr(dup), fptr(h), fptr(dout), fptr(gate), fptr(up), C.long(n))
}

// softmaxCausalC is softmaxCausal on the rows lo..hi-1 of p [*,T] (window:
// see softmaxCausal).
func softmaxCausalC(p []float32, T, lo, hi, window int) {
	if lo >= hi {
		return
	}
	_ = p[hi*T-1]
	C.rl_softmax_causal(fptr(p), C.long(T), C.long(lo), C.long(hi), C.long(window))
}

// softmaxCausalLseC is softmaxCausalC that also writes the log-sum-exp of
// row r (before normalising) to lse[r].
func softmaxCausalLseC(p, lse []float32, T, lo, hi, window int) {
	if lo >= hi {
		return
	}
	_, _ = p[hi*T-1], lse[hi-1]
	C.rl_softmax_causal_lse(fptr(p), fptr(lse), C.long(T), C.long(lo), C.long(hi), C.long(window))
}

func logprobFwdC(logp, entropy, lse, logits []float32, targets []int32, lo, hi, V int) {
	if lo >= hi {
		return
	}
	_, _, _, _, _ = logp[hi-1], entropy[hi-1], lse[hi-1], targets[hi-1], logits[hi*V-1]
	for _, t := range targets[lo:hi] {
		if int(t) >= V {
			panic("cpu: LogprobForward target outside the vocabulary")
		}
	}
	C.rl_logprob_fwd(fptr(logp), fptr(entropy), fptr(lse), fptr(logits), iptr(targets), C.long(lo), C.long(hi), C.long(V))
}

func logprobBwdC(dlogits, logits, lse, entropy []float32, targets []int32, dlogp, dentropy []float32, lo, hi, V int) {
	if lo >= hi {
		return
	}
	_, _, _, _, _, _, _ = dlogits[hi*V-1], logits[hi*V-1], lse[hi-1], entropy[hi-1], targets[hi-1], dlogp[hi-1], dentropy[hi-1]
	for _, t := range targets[lo:hi] {
		if int(t) >= V {
			panic("cpu: LogprobBackward target outside the vocabulary")
		}
	}
	C.rl_logprob_bwd(fptr(dlogits), fptr(logits), fptr(lse), fptr(entropy), iptr(targets), fptr(dlogp), fptr(dentropy),
		C.long(lo), C.long(hi), C.long(V))
}

func adamwC(params, grads, m, v []float32, lr, beta1, beta2, eps, wd, bc1, bc2 float32) {
	n := len(params)
	if n == 0 {
		return
	}
	_, _, _ = grads[n-1], m[n-1], v[n-1]
	C.rl_adamw(fptr(params), fptr(grads), fptr(m), fptr(v), C.long(n), C.float(lr), C.float(beta1), C.float(beta2),
		C.float(eps), C.float(wd), C.float(bc1), C.float(bc2))
}

// expC is the kernels' vectorised e^x over x (tests only).
func expC(out, x []float32) {
	if len(out) == 0 {
		return
	}
	_ = x[len(out)-1]
	C.rl_exp(fptr(out), fptr(x), C.long(len(out)))
}

func sumSquaresC(x []float32) float64 {
	if len(x) == 0 {
		return 0
	}
	return float64(C.rl_sumsq(fptr(x), C.long(len(x))))
}

func scaleC(x []float32, s float32) {
	if len(x) == 0 {
		return
	}
	C.rl_scale(fptr(x), C.long(len(x)), C.float(s))
}

func rmsnormFwdC(out, rstd, inp, weight []float32, lo, hi, nc int, eps float32) {
	if lo >= hi {
		return
	}
	_, _, _, _ = out[hi*nc-1], inp[hi*nc-1], rstd[hi-1], weight[nc-1]
	C.rl_rmsnorm_fwd(fptr(out), fptr(rstd), fptr(inp), fptr(weight), C.long(lo), C.long(hi), C.long(nc), C.float(eps))
}

func rmsnormBwdDinpC(dinp, dout, inp, weight, rstd []float32, lo, hi, nc int) {
	if lo >= hi {
		return
	}
	_, _, _, _, _ = dinp[hi*nc-1], dout[hi*nc-1], inp[hi*nc-1], weight[nc-1], rstd[hi-1]
	C.rl_rmsnorm_bwd_dinp(fptr(dinp), fptr(dout), fptr(inp), fptr(weight), fptr(rstd), C.long(lo), C.long(hi), C.long(nc))
}

// rmsnormBwdDwC: dout2 nil, or a second output gradient added to dout.
func rmsnormBwdDwC(dweight, dout, dout2, inp, rstd []float32, N, nc, c0, c1 int) {
	if N == 0 || c0 >= c1 {
		return
	}
	_, _, _, _ = dweight[nc-1], dout[N*nc-1], inp[N*nc-1], rstd[N-1]
	var d2 *C.float
	if dout2 != nil {
		_ = dout2[N*nc-1]
		d2 = fptr(dout2)
	}
	C.rl_rmsnorm_bwd_dw(fptr(dweight), fptr(dout), d2, fptr(inp), fptr(rstd), C.long(N), C.long(nc), C.long(c0), C.long(c1))
}

func residualRMSNormFwdC(res, out, rstd, a, b, weight []float32, lo, hi, nc int, eps float32) {
	if lo >= hi {
		return
	}
	_, _, _, _, _, _ = res[hi*nc-1], out[hi*nc-1], a[hi*nc-1], b[hi*nc-1], rstd[hi-1], weight[nc-1]
	C.rl_residual_rmsnorm_fwd(fptr(res), fptr(out), fptr(rstd), fptr(a), fptr(b), fptr(weight), C.long(lo), C.long(hi),
		C.long(nc), C.float(eps))
}

// rmsnormBwdDinpAddC: dout2 nil, or a second output gradient added to dout.
func rmsnormBwdDinpAddC(dinp, dout, dout2, inp, weight, rstd []float32, lo, hi, nc int) {
	if lo >= hi {
		return
	}
	_, _, _, _, _ = dinp[hi*nc-1], dout[hi*nc-1], inp[hi*nc-1], weight[nc-1], rstd[hi-1]
	var d2 *C.float
	if dout2 != nil {
		_ = dout2[hi*nc-1]
		d2 = fptr(dout2)
	}
	C.rl_rmsnorm_bwd_dinp_add(fptr(dinp), fptr(dout), d2, fptr(inp), fptr(weight), fptr(rstd), C.long(lo), C.long(hi),
		C.long(nc))
}

// attentionCachedC is the cached attention of kernels.c over the work items
// [lo, hi) (token, kv head) on the calling goroutine, or, with parts > 1,
// over all N*NKV items on that many threads of the C pool (pool.c). The
// caller checks HD%8 == 0 and NH/NKV <= 8; rows and window are
// AttentionCachedForward's, maxLen at least every token's span of positions.
func attentionCachedC(out, q, kc, vc []float32, slot, pos []int32, N, NH, NKV, HD, rows, window, lo, hi int, scale float32, maxLen, parts int) {
	if lo >= hi {
		return
	}
	KD := NKV * HD
	_, _, _, _ = out[N*NH*HD-1], q[N*NH*HD-1], slot[N-1], pos[N-1]
	for n := lo / NKV; n <= (hi-1)/NKV; n++ {
		p := int(pos[n])
		span := p + 1
		if window > 0 {
			span = min(span, window)
		}
		if p < 0 || span > rows || span > maxLen || int(slot[n]) < 0 || (int(slot[n])+1)*rows*KD > min(len(kc), len(vc)) {
			panic("cpu: AttentionCachedForward: position or slot outside the cache")
		}
	}
	avx512 := useAVX512Attention && HD%16 == 0
	if parts > 1 {
		if lo != 0 || hi != N*NKV {
			panic("cpu: AttentionCachedForward: a pooled run covers every item")
		}
		a := C.int(0)
		if avx512 {
			a = 1
		}
		C.rl_attention_cached_mt(C.int(parts), a, fptr(out), fptr(q), fptr(kc), fptr(vc), iptr(slot), iptr(pos), C.long(N),
			C.long(NH), C.long(NKV), C.long(HD), C.long(rows), C.long(window), C.float(scale), C.long(maxLen))
		return
	}
	s := make([]float32, NH/NKV*maxLen)
	if avx512 {
		C.rl_attention_cached_avx512(fptr(out), fptr(q), fptr(kc), fptr(vc), iptr(slot), iptr(pos), C.long(NH), C.long(NKV),
			C.long(HD), C.long(rows), C.long(window), C.long(lo), C.long(hi), C.float(scale), fptr(s), C.long(maxLen))
		return
	}
	C.rl_attention_cached(fptr(out), fptr(q), fptr(kc), fptr(vc), iptr(slot), iptr(pos), C.long(NH), C.long(NKV),
		C.long(HD), C.long(rows), C.long(window), C.long(lo), C.long(hi), C.float(scale), fptr(s), C.long(maxLen))
}

// ExpShift writes out[i] = exp((x[i]-m)*s) (the float32 exp of this
// package, see expf) and returns their sum in double: the unnormalised
// probabilities of a sampling step, logits x shifted by their maximum m and
// scaled by 1/temperature s.
func ExpShift(out, x []float32, m, s float32) float64 {
	n := len(x)
	if n == 0 {
		return 0
	}
	_ = out[n-1]
	if useKernels {
		return float64(C.rl_exp_shift(fptr(out), fptr(x), C.long(n), C.float(m), C.float(s)))
	}
	var sum float64
	for lo := 0; lo < n; lo += 256 {
		var part [8]float32 // the kernel's lanes and blocks
		for i := lo; i < min(lo+256, n); i++ {
			out[i] = expf((x[i] - m) * s)
			part[i%8] += out[i]
		}
		for _, p := range part {
			sum += float64(p)
		}
	}
	return sum
}
