package cpu

import (
	"fmt"
	"math"
	"runtime"

	"github.com/rlhost/rlhost/gpu"
)

// Backend is the CPU implementation of gpu.Backend. Its zero value is ready to use.
type Backend struct{}

var _ gpu.Backend = Backend{}

// New returns the CPU backend.
func New() Backend { return Backend{} }

// Name reports "cpu/openblas-<core>".
func (Backend) Name() string { return "cpu/openblas-" + CoreName() }

// Sgemm is the package-level Sgemm.
func (Backend) Sgemm(transA, transB bool, M, N, K int, alpha float32, A []float32, lda int,
	B []float32, ldb int, beta float32, C []float32, ldc int) {
	Sgemm(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)
}

// ---------------------------------------------------------------------------
// embedding

// EmbeddingForward: out [N,C] = wte[tokens[n]] with wte [V,C].
func (Backend) EmbeddingForward(out []float32, tokens []int32, wte []float32, N, C int) {
	for n := 0; n < N; n++ {
		t := int(tokens[n])
		copy(out[n*C:(n+1)*C], wte[t*C:(t+1)*C])
	}
}

// EmbeddingBackward: dwte[tokens[n]] += dout[n].
func (Backend) EmbeddingBackward(dwte []float32, dout []float32, tokens []int32, N, C int) {
	for n := 0; n < N; n++ {
		t := int(tokens[n])
		axpy(dwte[t*C:(t+1)*C], 1, dout[n*C:(n+1)*C])
	}
}

// ---------------------------------------------------------------------------
// RMSNorm

// RMSNormForward: out [N,C] = inp * rstd * weight, rstd [N].
func (Backend) RMSNormForward(out, rstd []float32, inp, weight []float32, N, C int, eps float32) {
	w := weight[:C]
	parallelRows(N, 3*C, func(lo, hi int) {
		if useKernels {
			rmsnormFwdC(out, rstd, inp, w, lo, hi, C, eps)
			return
		}
		for n := lo; n < hi; n++ {
			x := inp[n*C : (n+1)*C]
			o := out[n*C : (n+1)*C]
			var ss float32
			for _, xi := range x {
				ss += xi * xi
			}
			r := float32(1 / math.Sqrt(float64(ss/float32(C)+eps)))
			for i, xi := range x {
				o[i] = xi * r * w[i]
			}
			rstd[n] = r
		}
	})
}

// ResidualRMSNormForward: res [N,C] = a + b (res may alias a or b), then
// out [N,C] = res * rstd * weight, rstd [N], in one pass over the rows: the
// sum is squared as it is written and the scaling re-reads it from cache,
// where ResidualForward then RMSNormForward read it back from memory. The
// results equal theirs exactly.
func (Backend) ResidualRMSNormForward(res, out, rstd []float32, a, b, weight []float32, N, C int, eps float32) {
	w := weight[:C]
	parallelRows(N, 4*C, func(lo, hi int) {
		if useKernels {
			residualRMSNormFwdC(res, out, rstd, a, b, w, lo, hi, C, eps)
			return
		}
		for n := lo; n < hi; n++ {
			x, y := a[n*C:(n+1)*C], b[n*C:(n+1)*C]
			s, o := res[n*C:(n+1)*C], out[n*C:(n+1)*C]
			var ss float32
			for i := range s {
				v := x[i] + y[i]
				s[i] = v
				ss += v * v
			}
			r := float32(1 / math.Sqrt(float64(ss/float32(C)+eps)))
			for i, v := range s {
				o[i] = v * r * w[i]
			}
			rstd[n] = r
		}
	})
}

// RMSNormBackward: dinp [N,C] overwritten, dweight [C] accumulated.
//
//	dinp_i = rstd * (w_i*dout_i - x_i * rstd^2 * mean_j(w_j*dout_j*x_j))
func (Backend) RMSNormBackward(dinp, dweight []float32, dout, inp, weight, rstd []float32, N, C int) {
	rmsnormBackward(dinp, dweight, dout, nil, inp, weight, rstd, N, C, false)
}

// ResidualRMSNormBackward: dres [N,C] += the input gradient of the norm,
// whose output gradient is dout + dout2 (dout2 may be nil); dweight [C]
// accumulated. The sum of the two output gradients and the add into the
// residual stream's gradient happen in the norm's own passes.
func (Backend) ResidualRMSNormBackward(dres, dweight []float32, dout, dout2, res, weight, rstd []float32, N, C int) {
	rmsnormBackward(dres, dweight, dout, dout2, res, weight, rstd, N, C, true)
}

// rmsnormBackward is RMSNormBackward (add false: dinp overwritten) and
// ResidualRMSNormBackward (add true: dinp accumulated), with dout2 nil or
// added to dout.
func rmsnormBackward(dinp, dweight []float32, dout, dout2, inp, weight, rstd []float32, N, C int, add bool) {
	w := weight[:C]
	if useKernels {
		// dweight: each goroutine reduces all rows for its columns (8-aligned ranges)
		parallelRows((C+7)/8, 8*N, func(lo, hi int) {
			rmsnormBwdDwC(dweight, dout, dout2, inp, rstd, N, C, lo*8, min(hi*8, C))
		})
		parallelRows(N, 4*C, func(lo, hi int) {
			if add {
				rmsnormBwdDinpAddC(dinp, dout, dout2, inp, w, rstd, lo, hi, C)
			} else {
				rmsnormBwdDinpC(dinp, dout, inp, w, rstd, lo, hi, C)
			}
		})
		return
	}
	// d is row n of the output gradient (dout + dout2), in buf when summed.
	row := func(n int, buf []float32) []float32 {
		d := dout[n*C : (n+1)*C]
		if dout2 == nil {
			return d
		}
		for i, v := range dout2[n*C : (n+1)*C] {
			buf[i] = d[i] + v
		}
		return buf
	}
	var buf []float32
	if dout2 != nil {
		buf = make([]float32, C)
	}
	for n := 0; n < N; n++ { // dweight: a sequential reduction over rows
		x := inp[n*C : (n+1)*C]
		d := row(n, buf)
		r := rstd[n]
		dw := dweight[:C]
		for i := range dw {
			dw[i] += d[i] * x[i] * r
		}
	}
	parallelRows(N, 4*C, func(lo, hi int) {
		var buf []float32
		if dout2 != nil {
			buf = make([]float32, C)
		}
		for n := lo; n < hi; n++ {
			x := inp[n*C : (n+1)*C]
			d := row(n, buf)
			di := dinp[n*C : (n+1)*C]
			r := rstd[n]
			var dot float32
			for i := range x {
				dot += w[i] * d[i] * x[i]
			}
			c := r * r * dot / float32(C)
			for i := range x {
				if add {
					di[i] += r * (w[i]*d[i] - x[i]*c)
				} else {
					di[i] = r * (w[i]*d[i] - x[i]*c)
				}
			}
		}
	})
}

// ---------------------------------------------------------------------------
// matmul

// MatmulForward: out [N,OC] = inp [N,C] weight^T [C,OC] + bias [OC]. Up to
// SmallMatmulMaxN rows (a decode step) on AVX-512 CPUs it runs the
// small-batch kernel, which reads the weights in place; otherwise sgemm. (On
// AVX2 CPUs only generation takes the kernel's AVX2 tiles, DecodeMatmul.)
func (Backend) MatmulForward(out, inp, weight, bias []float32, N, C, OC int) {
	if N <= SmallMatmulMaxN && N > 0 && BestLowpISA >= ISAAVX512 {
		if len(inp) < N*C || len(out) < N*OC || len(weight) < OC*C || (bias != nil && len(bias) < OC) {
			panic(fmt.Sprintf("cpu: matmul: inp %d, out %d, weight %d, bias %d values for N=%d, C=%d, OC=%d",
				len(inp), len(out), len(weight), len(bias), N, C, OC))
		}
		smallMatmul(BestLowpISA, out, inp, weight, bias, N, C, OC)
		return
	}
	Sgemm(false, true, N, OC, C, 1, inp, C, weight, C, 0, out, OC)
	if bias != nil {
		b := bias[:OC]
		parallelRows(N, OC, func(lo, hi int) {
			for n := lo; n < hi; n++ {
				axpy(out[n*OC:(n+1)*OC], 1, b)
			}
		})
	}
}

// MatmulBackward: dinp [N,C] = dout [N,OC] weight [OC,C] (+= with
// accumulate: sgemm's beta 1); dweight [OC,C] += dout^T inp; dbias [OC] +=
// column sums of dout.
func (Backend) MatmulBackward(dinp, dweight, dbias []float32, dout, inp, weight []float32, N, C, OC int, accumulate bool) {
	if dinp != nil {
		var beta float32
		if accumulate {
			beta = 1
		}
		Sgemm(false, false, N, C, OC, 1, dout, OC, weight, C, beta, dinp, C)
	}
	if dweight != nil {
		Sgemm(true, false, OC, C, N, 1, dout, OC, inp, C, 1, dweight, C)
	}
	if dbias != nil {
		db := dbias[:OC]
		for n := 0; n < N; n++ {
			axpy(db, 1, dout[n*OC:(n+1)*OC])
		}
	}
}

// ---------------------------------------------------------------------------
// RoPE

// RopeForward rotates [N,H,HD] by the angles of each token's position.
func (Backend) RopeForward(out, inp []float32, pos []int32, cos, sin []float32, N, H, HD int, layout gpu.RopeLayout) {
	rope(out, inp, pos, cos, sin, N, H, HD, layout, 1)
}

// RopeBackward rotates the gradient by the opposite angles.
func (Backend) RopeBackward(dinp, dout []float32, pos []int32, cos, sin []float32, N, H, HD int, layout gpu.RopeLayout) {
	rope(dinp, dout, pos, cos, sin, N, H, HD, layout, -1)
}

// RopeQKForward rotates q [N,NH,HD] and k [N,NKV,HD] in place, token by
// token: one pass over the rows, each token's cos/sin row read once.
func (Backend) RopeQKForward(q, k []float32, pos []int32, cos, sin []float32, N, NH, NKV, HD int, layout gpu.RopeLayout) {
	ropeQK(q, k, pos, cos, sin, N, NH, NKV, HD, layout, 1)
}

// RopeQKBackward rotates dq and dk back in place.
func (Backend) RopeQKBackward(dq, dk []float32, pos []int32, cos, sin []float32, N, NH, NKV, HD int, layout gpu.RopeLayout) {
	ropeQK(dq, dk, pos, cos, sin, N, NH, NKV, HD, layout, -1)
}

// rope rotates each channel pair (a, b) of every head:
// a' = a cos - sign*b sin, b' = b cos + sign*a sin.
func rope(out, inp []float32, pos []int32, cos, sin []float32, N, H, HD int, layout gpu.RopeLayout, sign float32) {
	half := HD / 2
	parallelRows(N, H*HD*2, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			p := int(pos[n])
			ropeHeads(out[n*H*HD:(n+1)*H*HD], inp[n*H*HD:(n+1)*H*HD], cos[p*half:(p+1)*half], sin[p*half:(p+1)*half],
				H, HD, layout, sign)
		}
	})
}

// ropeQK is rope over the query and the key heads of each token, in place.
func ropeQK(q, k []float32, pos []int32, cos, sin []float32, N, NH, NKV, HD int, layout gpu.RopeLayout, sign float32) {
	half := HD / 2
	parallelRows(N, (NH+NKV)*HD*2, func(lo, hi int) {
		for n := lo; n < hi; n++ {
			p := int(pos[n])
			c, s := cos[p*half:(p+1)*half], sin[p*half:(p+1)*half]
			qn, kn := q[n*NH*HD:(n+1)*NH*HD], k[n*NKV*HD:(n+1)*NKV*HD]
			ropeHeads(qn, qn, c, s, NH, HD, layout, sign)
			ropeHeads(kn, kn, c, s, NKV, HD, layout, sign)
		}
	})
}

// ropeHeads rotates the H heads of one token: out, inp [H,HD] (may alias),
// c, s [HD/2] the token's row of the tables.
func ropeHeads(out, inp, c, s []float32, H, HD int, layout gpu.RopeLayout, sign float32) {
	half := HD / 2
	for h := 0; h < H; h++ {
		x := inp[h*HD : (h+1)*HD]
		o := out[h*HD : (h+1)*HD]
		if layout == gpu.RopePairs {
			for i := 0; i < half; i++ {
				a, b := x[2*i], x[2*i+1]
				ss := sign * s[i]
				o[2*i] = a*c[i] - b*ss
				o[2*i+1] = b*c[i] + a*ss
			}
		} else {
			for i := 0; i < half; i++ {
				a, b := x[i], x[i+half]
				ss := sign * s[i]
				o[i] = a*c[i] - b*ss
				o[i+half] = b*c[i] + a*ss
			}
		}
	}
}

// ---------------------------------------------------------------------------
// attention

// attnBlock is the row block of the causal attention products: the query
// rows [r0, r1) of a block only need the keys [0, r1), so with T/attnBlock
// blocks the products skip most of the upper triangle (3/4 of the full
// T x T FLOPs at two blocks, 5/8 at four). A variable so the tests can
// exercise many blocks on small T.
var attnBlock = 128

// AttentionForward is causal GQA attention; see gpu.Backend.
// B batch, T time, NH query heads, NKV key/value heads, HD head dim.
// One sequence at a time: sgemm per head and row block for the scores and
// the weighted values, the causal softmax of all NH*T rows spread over
// goroutines. With a sliding window the products of a row block take only
// the keys its rows can see.
func (Backend) AttentionForward(out, scratch []float32, q, k, v []float32, B, T, NH, NKV, HD, window int) {
	p := scratch[:NH*T*T] // [NH,T,T] probabilities of one sequence
	for b := 0; b < B; b++ {
		attentionSeqForward(out, nil, p, q, k, v, b, T, NH, NKV, HD, window)
	}
}

// keyStart is the first key the rows from r0 on can see: 0, or r0-window+1
// (at least 0) with a sliding window.
func keyStart(r0, window int) int {
	if window > 0 {
		return max(0, r0-window+1)
	}
	return 0
}

// rowEnd is one past the last query row that can see the keys before c1:
// T, or c1+window-1 (at most T) with a sliding window.
func rowEnd(c1, T, window int) int {
	if window > 0 {
		return min(T, c1+window-1)
	}
	return T
}

// attentionSeqForward is AttentionForward of sequence b alone; p [NH,T,T] is
// scratch and lse [NH*T] (if not nil) gets each row's log-sum-exp.
func attentionSeqForward(out, lse, p []float32, q, k, v []float32, b, T, NH, NKV, HD, window int) {
	group := NH / NKV
	qs, ks := NH*HD, NKV*HD // row strides of q/out and k/v
	attentionProbs(p, lse, q, k, b, T, NH, NKV, HD, window)
	// out[b,r0:r1,h,:] = P[h][r0:r1,k0:r1] v[b,k0:r1,h/group,:]
	for h := 0; h < NH; h++ {
		kh := h / group
		for r0 := 0; r0 < T; r0 += attnBlock {
			r1 := min(r0+attnBlock, T)
			k0 := keyStart(r0, window)
			Sgemm(false, false, r1-r0, HD, r1-k0, 1, p[h*T*T+r0*T+k0:], T, v[(b*T+k0)*ks+kh*HD:], ks,
				0, out[(b*T+r0)*qs+h*HD:], qs)
		}
	}
}

// attentionProbs fills p [NH,T,T] with the causal softmax of
// q[b,:,h,:] k[b,:,h/group,:]^T / sqrt(HD) for every head h of sequence b
// (0 where a query does not see the key: after it, or before its window),
// and lse [NH*T] (if not nil) with the log-sum-exp of each row's scores,
// row h*T+t.
func attentionProbs(p, lse []float32, q, k []float32, b, T, NH, NKV, HD, window int) {
	group := NH / NKV
	scale := float32(1 / math.Sqrt(float64(HD)))
	qs, ks := NH*HD, NKV*HD
	for h := 0; h < NH; h++ {
		kh := h / group
		for r0 := 0; r0 < T; r0 += attnBlock { // scores of the rows [r0, r1) against the keys [k0, r1)
			r1 := min(r0+attnBlock, T)
			k0 := keyStart(r0, window)
			Sgemm(false, true, r1-r0, r1-k0, HD, scale, q[(b*T+r0)*qs+h*HD:], qs, k[(b*T+k0)*ks+kh*HD:], ks,
				0, p[h*T*T+r0*T+k0:], T)
		}
	}
	// row r = h*T + t is query t of head h; the softmax reads row[lo..t] and
	// zeroes the rest (which the blocked products left unwritten)
	parallelRows(NH*T, T*4, func(lo, hi int) {
		if useKernels && lse != nil {
			softmaxCausalLseC(p, lse, T, lo, hi, window)
			return
		}
		if useKernels {
			softmaxCausalC(p, T, lo, hi, window)
			return
		}
		for r := lo; r < hi; r++ {
			l := softmaxCausal(p[r*T:(r+1)*T], r%T, window)
			if lse != nil {
				lse[r] = l
			}
		}
	})
}

// softmaxCausal turns row[lo..t] into probabilities and zeroes the rest of
// the row, lo = 0, or t-window+1 (at least 0) with a sliding window; it
// returns the log-sum-exp of row[lo..t] as it was.
func softmaxCausal(row []float32, t, window int) float32 {
	lo := keyStart(t, window)
	clear(row[:lo])
	m := row[lo]
	for _, x := range row[lo+1 : t+1] {
		m = max(m, x)
	}
	var sum float32
	for j := lo; j <= t; j++ {
		e := expf(row[j] - m)
		row[j] = e
		sum += e
	}
	inv := 1 / sum
	for j := lo; j <= t; j++ {
		row[j] *= inv
	}
	clear(row[t+1:])
	return m + float32(math.Log(float64(sum)))
}

// AttentionBackward: see gpu.Backend. Per sequence it recomputes P, then
// dP = dout V^T, dV += P^T dout, dS = P*(dP - rowsum(dP*P))/sqrt(HD),
// dQ = dS K, dK += dS^T Q. P and dS are lower triangular (a band with a
// sliding window): the products by rows (dP, dQ) take the keys [k0, r1) of
// each row block [r0, r1), the products by columns (dV, dK) the rows
// [c0, rowEnd) of each column block.
func (Backend) AttentionBackward(dq, dk, dv, scratch []float32, dout, q, k, v []float32, B, T, NH, NKV, HD, window int) {
	p, dp := scratch[:NH*T*T], scratch[NH*T*T:2*NH*T*T]
	for b := 0; b < B; b++ {
		attentionSeqBackward(dq, dk, dv, p, dp, dout, q, k, v, b, T, NH, NKV, HD, window)
	}
}

// attentionSeqBackward is AttentionBackward of sequence b alone (its rows of
// dq, dk, dv overwritten); p, dp [NH,T,T] are scratch.
func attentionSeqBackward(dq, dk, dv, p, dp []float32, dout, q, k, v []float32, b, T, NH, NKV, HD, window int) {
	group := NH / NKV
	scale := float32(1 / math.Sqrt(float64(HD)))
	qs, ks := NH*HD, NKV*HD
	clear(dk[b*T*ks : (b+1)*T*ks])
	clear(dv[b*T*ks : (b+1)*T*ks])
	attentionProbs(p, nil, q, k, b, T, NH, NKV, HD, window)
	for h := 0; h < NH; h++ {
		kh := h / group
		do := dout[b*T*qs+h*HD:]
		ph, dph := p[h*T*T:], dp[h*T*T:]
		for r0 := 0; r0 < T; r0 += attnBlock {
			r1 := min(r0+attnBlock, T)
			k0, re := keyStart(r0, window), rowEnd(r1, T, window)
			// dP[r0:r1, k0:r1] = dout[r0:r1] V[k0:r1]^T
			Sgemm(false, true, r1-r0, r1-k0, HD, 1, do[r0*qs:], qs, v[(b*T+k0)*ks+kh*HD:], ks, 0, dph[r0*T+k0:], T)
			// dV[r0:r1] += P[r0:re, r0:r1]^T dout[r0:re]
			Sgemm(true, false, r1-r0, HD, re-r0, 1, ph[r0*T+r0:], T, do[r0*qs:], qs,
				1, dv[(b*T+r0)*ks+kh*HD:], ks)
		}
	}
	parallelRows(NH*T, T*4, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			t := r % T
			j0 := keyStart(t, window)
			pr := p[r*T+j0 : r*T+t+1]
			d := dp[r*T : (r+1)*T]
			var dot float32
			for j, pj := range pr {
				dot += pj * d[j0+j]
			}
			for j, pj := range pr {
				d[j0+j] = pj * (d[j0+j] - dot) * scale
			}
			clear(d[:j0])
			clear(d[t+1:])
		}
	})
	for h := 0; h < NH; h++ {
		kh := h / group
		ds := dp[h*T*T:]
		for r0 := 0; r0 < T; r0 += attnBlock {
			r1 := min(r0+attnBlock, T)
			k0, re := keyStart(r0, window), rowEnd(r1, T, window)
			// dQ[r0:r1] = dS[r0:r1, k0:r1] K[k0:r1]
			Sgemm(false, false, r1-r0, HD, r1-k0, 1, ds[r0*T+k0:], T, k[(b*T+k0)*ks+kh*HD:], ks,
				0, dq[(b*T+r0)*qs+h*HD:], qs)
			// dK[r0:r1] += dS[r0:re, r0:r1]^T Q[r0:re]
			Sgemm(true, false, r1-r0, HD, re-r0, 1, ds[r0*T+r0:], T, q[(b*T+r0)*qs+h*HD:], qs,
				1, dk[(b*T+r0)*ks+kh*HD:], ks)
		}
	}
}

// AttentionCachedForward: see gpu.Backend. One (token, head) pair is a row of
// work; rows are spread over goroutines.
func (Backend) AttentionCachedForward(out, q, kcache, vcache []float32, slot, pos []int32, N, NH, NKV, HD, rows, window int) {
	group := NH / NKV
	scale := float32(1 / math.Sqrt(float64(HD)))
	KD := NKV * HD
	maxLen := 0
	for n := 0; n < N; n++ {
		maxLen = max(maxLen, int(pos[n])+1)
	}
	if window > 0 {
		maxLen = min(maxLen, window)
	}
	if useKernels && HD%8 == 0 && group <= 8 {
		// one item per (token, kv head): the group's query heads share each key and value row;
		// the items are split over the C pool's threads (a decode step's other products run
		// there too, so no goroutine competes with its spinning helpers)
		parts := min(runtime.GOMAXPROCS(0), N*NKV)
		if N*NKV*maxLen*HD*2*group < minWork {
			parts = 1
		}
		attentionCachedC(out, q, kcache, vcache, slot, pos, N, NH, NKV, HD, rows, window, 0, N*NKV, scale, maxLen, parts)
		return
	}
	parallelRows(N*NH, maxLen*HD*2, func(lo, hi int) {
		scores := make([]float32, maxLen)
		for r := lo; r < hi; r++ {
			n, h := r/NH, r%NH
			kh := h / group
			j0 := keyStart(int(pos[n]), window)
			P := int(pos[n]) + 1 - j0 // positions j0 .. pos[n]
			if P > rows {
				panic("cpu: AttentionCachedForward: a token sees more positions than its slot's rows hold")
			}
			base := int(slot[n]) * rows * KD
			row := func(j int) int { return base + ((j0+j)%rows)*KD + kh*HD }
			qh := q[(n*NH+h)*HD : (n*NH+h+1)*HD]
			s := scores[:P]
			m := float32(math.Inf(-1))
			for j := range s {
				s[j] = dot(qh, kcache[row(j):row(j)+HD]) * scale
				m = max(m, s[j])
			}
			var sum float32
			for j := range s {
				s[j] = expf(s[j] - m)
				sum += s[j]
			}
			o := out[(n*NH+h)*HD : (n*NH+h+1)*HD]
			clear(o)
			inv := 1 / sum
			for j, sj := range s {
				axpy(o, sj*inv, vcache[row(j):row(j)+HD])
			}
		}
	})
}

// ---------------------------------------------------------------------------
// SwiGLU and residual

// SwiGLUForward: out = silu(gate) * up.
func (Backend) SwiGLUForward(out, gate, up []float32, n int) {
	if useKernels && n > 0 {
		parts := runtime.GOMAXPROCS(0)
		if n*8 < minWork {
			parts = 1
		}
		swigluFwdPool(parts, out[:n], gate[:n], up[:n])
		return
	}
	parallelRows(n, 8, func(lo, hi int) {
		if useKernels {
			swigluFwdC(out[lo:hi], gate[lo:hi], up[lo:hi])
			return
		}
		for i := lo; i < hi; i++ {
			g := gate[i]
			out[i] = g / (1 + expf(-g)) * up[i]
		}
	})
}

// SwiGLUBackward: dgate = dout*up*silu'(gate), dup = dout*silu(gate).
func (Backend) SwiGLUBackward(dgate, dup []float32, dout, gate, up []float32, n int) {
	parallelRows(n, 10, func(lo, hi int) {
		if useKernels {
			swigluBwdC(dgate[lo:hi], dup[lo:hi], dout[lo:hi], gate[lo:hi], up[lo:hi])
			return
		}
		for i := lo; i < hi; i++ {
			g := gate[i]
			s := 1 / (1 + expf(-g))
			d := dout[i]
			dup[i] = d * g * s
			dgate[i] = d * up[i] * s * (1 + g*(1-s))
		}
	})
}

// SwiGLUBackwardH is SwiGLUBackward that also writes h = silu(gate) * up,
// as SwiGLUForward computes it, in one pass.
func (Backend) SwiGLUBackwardH(dgate, dup, h []float32, dout, gate, up []float32, n int) {
	parallelRows(n, 12, func(lo, hi int) {
		if useKernels {
			swigluBwdHC(dgate[lo:hi], dup[lo:hi], h[lo:hi], dout[lo:hi], gate[lo:hi], up[lo:hi])
			return
		}
		for i := lo; i < hi; i++ {
			g, u := gate[i], up[i]
			e := expf(-g)
			h[i] = g / (1 + e) * u // SwiGLUForward's Go loop
			s := 1 / (1 + e)
			d := dout[i]
			dup[i] = d * g * s
			dgate[i] = d * u * s * (1 + g*(1-s))
		}
	})
}

// geluTanhC is sqrt(2/pi), the scale of PyTorch's tanh approximation of GELU.
const geluTanhC = 0.7978845608028654

// geluTanh is gelu_tanh(g) and its derivative, in float64 from the float32
// input and rounded once (within an ulp of PyTorch's float32 formula).
func geluTanh(g float32) (y, dy float32) {
	x := float64(g)
	u := geluTanhC * (x + 0.044715*x*x*x)
	t := math.Tanh(u)
	return float32(0.5 * x * (1 + t)), float32(0.5*(1+t) + 0.5*x*(1-t*t)*geluTanhC*(1+3*0.044715*x*x))
}

// GeGLUForward: out = gelu_tanh(gate) * up.
func (Backend) GeGLUForward(out, gate, up []float32, n int) {
	parallelRows(n, 40, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			y, _ := geluTanh(gate[i])
			out[i] = y * up[i]
		}
	})
}

// GeGLUBackwardH: dgate = dout*up*gelu_tanh'(gate), dup = dout*gelu_tanh(gate),
// and h = GeGLUForward's out, in one pass.
func (Backend) GeGLUBackwardH(dgate, dup, h []float32, dout, gate, up []float32, n int) {
	parallelRows(n, 44, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			y, dy := geluTanh(gate[i])
			u, d := up[i], dout[i]
			h[i] = y * u
			dup[i] = d * y
			dgate[i] = d * u * dy
		}
	})
}

// SoftcapForward: x = cap * tanh(x / cap), in float64 and rounded once.
func (Backend) SoftcapForward(x []float32, cap float32, n int) {
	c := float64(cap)
	parallelRows(n, 20, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			x[i] = float32(c * math.Tanh(float64(x[i])/c))
		}
	})
}

// SoftcapBackward: dx *= 1 - (y/cap)^2.
func (Backend) SoftcapBackward(dx, y []float32, cap float32, n int) {
	parallelRows(n, 4, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			t := y[i] / cap
			dx[i] *= 1 - t*t
		}
	})
}

// ResidualForward: out = a + b.
func (Backend) ResidualForward(out, a, b []float32, n int) {
	parallelRows(n, 1, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			out[i] = a[i] + b[i]
		}
	})
}

// ResidualBackward: da += dout, db += dout.
func (Backend) ResidualBackward(da, db []float32, dout []float32, n int) {
	parallelRows(n, 2, func(lo, hi int) {
		axpy(da[lo:hi], 1, dout[lo:hi])
		axpy(db[lo:hi], 1, dout[lo:hi])
	})
}

// ---------------------------------------------------------------------------
// log-softmax, log-probs, entropy

// LogprobForward: see gpu.Backend. Sums are taken in float64.
func (Backend) LogprobForward(logp, entropy, lse []float32, logits []float32, targets []int32, N, V int) {
	parallelRows(N, V*4, func(lo, hi int) {
		if useKernels {
			logprobFwdC(logp, entropy, lse, logits, targets, lo, hi, V)
			return
		}
		for n := lo; n < hi; n++ {
			z := logits[n*V : (n+1)*V]
			m := z[0]
			for _, x := range z[1:] {
				m = max(m, x)
			}
			var se, sez float64 // sum exp(z-m), sum exp(z-m)*(z-m)
			for _, x := range z {
				d := x - m
				e := float64(expf(d))
				se += e
				sez += e * float64(d)
			}
			l := math.Log(se)
			lse[n] = m + float32(l)
			// H = lse - E[z] = log(se) - sez/se  (shift by m cancels)
			entropy[n] = float32(l - sez/se)
			if t := targets[n]; t >= 0 {
				logp[n] = z[t] - lse[n]
			} else {
				logp[n] = 0
			}
		}
	})
}

// LogprobBackward: dlogits = dlogp*(onehot - p) - dentropy*p*(log p + H).
func (Backend) LogprobBackward(dlogits []float32, logits, lse, entropy []float32, targets []int32,
	dlogp, dentropy []float32, N, V int) {
	parallelRows(N, V*4, func(lo, hi int) {
		if useKernels {
			logprobBwdC(dlogits, logits, lse, entropy, targets, dlogp, dentropy, lo, hi, V)
			return
		}
		for n := lo; n < hi; n++ {
			z := logits[n*V : (n+1)*V]
			dz := dlogits[n*V : (n+1)*V]
			l, H := lse[n], entropy[n]
			dl, dh := dlogp[n], dentropy[n]
			t := targets[n]
			if t < 0 {
				dl = 0
			}
			for j, x := range z {
				lp := x - l
				p := expf(lp)
				dz[j] = -dl*p - dh*p*(lp+H)
			}
			if t >= 0 {
				dz[t] += dl
			}
		}
	})
}

// ---------------------------------------------------------------------------
// optimizer

// SumSquares returns sum(x^2) in float64.
func (Backend) SumSquares(x []float32) float64 {
	return sumSquares(x)
}

func sumSquares(x []float32) float64 {
	const chunk = 1 << 16
	parts := make([]float64, (len(x)+chunk-1)/chunk)
	parallelRows(len(parts), chunk, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			if useKernels {
				parts[c] = sumSquaresC(x[c*chunk : min((c+1)*chunk, len(x))])
				continue
			}
			var s float64
			var s32 float32
			for i, xi := range x[c*chunk : min((c+1)*chunk, len(x))] {
				s32 += xi * xi
				if i%256 == 255 {
					s += float64(s32)
					s32 = 0
				}
			}
			parts[c] = s + float64(s32)
		}
	})
	var s float64
	for _, p := range parts {
		s += p
	}
	return s
}

// Scale multiplies x by s.
func (Backend) Scale(x []float32, s float32) {
	parallelRows(len(x), 1, func(lo, hi int) {
		if useKernels {
			scaleC(x[lo:hi], s)
			return
		}
		for i := lo; i < hi; i++ {
			x[i] *= s
		}
	})
}

// AdamW is torch.optim.AdamW's update; see gpu.Backend.
func (Backend) AdamW(params, grads, m, v []float32, step int, lr, beta1, beta2, eps, weightDecay float32) {
	bc1 := float32(1 - math.Pow(float64(beta1), float64(step)))
	bc2 := float32(1 - math.Pow(float64(beta2), float64(step)))
	parallelRows(len(params), 12, func(lo, hi int) {
		if useKernels {
			adamwC(params[lo:hi], grads[lo:hi], m[lo:hi], v[lo:hi], lr, beta1, beta2, eps, weightDecay, bc1, bc2)
			return
		}
		for i := lo; i < hi; i++ {
			g := grads[i]
			mi := beta1*m[i] + (1-beta1)*g
			vi := beta2*v[i] + (1-beta2)*g*g
			m[i], v[i] = mi, vi
			p := params[i] * (1 - lr*weightDecay)
			mhat := mi / bc1
			vhat := vi / bc2
			params[i] = p - lr*mhat/(sqrtf(vhat)+eps)
		}
	})
}

// ---------------------------------------------------------------------------
// small helpers

// axpy: y += a*x.
func axpy(y []float32, a float32, x []float32) {
	x = x[:len(y)]
	for i := range y {
		y[i] += a * x[i]
	}
}

func dot(a, b []float32) float32 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func sqrtf(x float32) float32 { return float32(math.Sqrt(float64(x))) }
