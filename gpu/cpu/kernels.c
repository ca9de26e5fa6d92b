// Vectorised (AVX2 + FMA) row loops of the CPU backend: the exp-bound
// SwiGLU, causal softmax and log-softmax passes and the memory-bound AdamW.
// Each kernel works on a range the Go side hands it (one goroutine's rows);
// the Go loops in backend.go remain the portable path and the reference the
// tests compare these kernels with. Compiled with -ffp-contract=off (the
// pragma below, for this file alone): every multiply-add that is fused is
// fused explicitly.

#pragma GCC optimize("fp-contract=off")

#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "kernels.h"
#include "pool.h"

int rl_have_avx2(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

#define AVX2 __attribute__((target("avx2,fma")))

// exp8 is e^x on 8 lanes, the algorithm of expf in exp.go: x = n ln2 + r,
// e^r by its degree-7 Taylor polynomial, times 2^n. 0 below -87.33654, +Inf
// above 88.72283, NaN for NaN.
static inline AVX2 __m256 exp8(__m256 x) {
	const __m256 hi = _mm256_set1_ps(88.72283f), lo = _mm256_set1_ps(-87.33654f);
	__m256 xc = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
	__m256 fn = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
		_MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
	__m256 r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(0.693359375f), xc);
	r = _mm256_fnmadd_ps(fn, _mm256_set1_ps(-2.12194440e-4f), r);
	__m256 p = _mm256_set1_ps(1.0f / 5040);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	// 2^n as 2^(n>>1) * 2^(n-(n>>1)): both factors stay normal for n in [-126, 128]
	__m256i n = _mm256_cvtps_epi32(fn);
	__m256i n1 = _mm256_srai_epi32(n, 1);
	__m256i n2 = _mm256_sub_epi32(n, n1);
	__m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, _mm256_set1_epi32(127)), 23));
	__m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, _mm256_set1_epi32(127)), 23));
	__m256 y = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
	y = _mm256_blendv_ps(y, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LT_OQ));
	y = _mm256_blendv_ps(y, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
	return _mm256_blendv_ps(y, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}

// tailmask has the first k < 8 lanes set: the masked loads and stores of the
// loops' tails.
static inline AVX2 __m256i tailmask(long k) {
	const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
	return _mm256_cmpgt_epi32(_mm256_set1_epi32((int)k), idx);
}

static inline AVX2 float hsum8(__m256 v) {
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

static inline AVX2 float hmax8(__m256 v) {
	__m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
	s = _mm_max_ps(s, _mm_movehl_ps(s, s));
	s = _mm_max_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

static inline AVX2 double hsum4d(__m256d v) {
	__m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
	return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

// sigmoid8 is 1/(1+e^-g).
static inline AVX2 __m256 sigmoid8(__m256 g) {
	const __m256 one = _mm256_set1_ps(1.0f);
	return _mm256_div_ps(one, _mm256_add_ps(one, exp8(_mm256_sub_ps(_mm256_setzero_ps(), g))));
}

AVX2 void rl_swiglu_fwd(float *out, const float *gate, const float *up, long n) {
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 g = _mm256_loadu_ps(gate + i);
		__m256 s = sigmoid8(g);
		_mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(g, s), _mm256_loadu_ps(up + i)));
	}
	if (i < n) {
		__m256i m = tailmask(n - i);
		__m256 g = _mm256_maskload_ps(gate + i, m);
		__m256 s = sigmoid8(g);
		_mm256_maskstore_ps(out + i, m, _mm256_mul_ps(_mm256_mul_ps(g, s), _mm256_maskload_ps(up + i, m)));
	}
}

// dgate = dout*up*s*(1 + g*(1-s)), dup = dout*g*s with s = sigmoid(g).
static inline AVX2 void swiglu_bwd8(__m256 d, __m256 g, __m256 u, __m256 *dg, __m256 *du) {
	const __m256 one = _mm256_set1_ps(1.0f);
	__m256 s = sigmoid8(g);
	*du = _mm256_mul_ps(_mm256_mul_ps(d, g), s);
	__m256 t = _mm256_add_ps(one, _mm256_mul_ps(g, _mm256_sub_ps(one, s)));
	*dg = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(d, u), s), t);
}

AVX2 void rl_swiglu_bwd(float *dgate, float *dup, const float *dout, const float *gate, const float *up, long n) {
	long i = 0;
	__m256 dg, du;
	for (; i + 8 <= n; i += 8) {
		swiglu_bwd8(_mm256_loadu_ps(dout + i), _mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i), &dg, &du);
		_mm256_storeu_ps(dgate + i, dg);
		_mm256_storeu_ps(dup + i, du);
	}
	if (i < n) {
		__m256i m = tailmask(n - i);
		swiglu_bwd8(_mm256_maskload_ps(dout + i, m), _mm256_maskload_ps(gate + i, m), _mm256_maskload_ps(up + i, m), &dg, &du);
		_mm256_maskstore_ps(dgate + i, m, dg);
		_mm256_maskstore_ps(dup + i, m, du);
	}
}

// swiglu_bwd_h8 is swiglu_bwd8 and rl_swiglu_fwd's h = g*s*u, from one sigmoid.
static inline AVX2 void swiglu_bwd_h8(__m256 d, __m256 g, __m256 u, __m256 *dg, __m256 *du, __m256 *h) {
	const __m256 one = _mm256_set1_ps(1.0f);
	__m256 s = sigmoid8(g);
	*h = _mm256_mul_ps(_mm256_mul_ps(g, s), u);
	*du = _mm256_mul_ps(_mm256_mul_ps(d, g), s);
	__m256 t = _mm256_add_ps(one, _mm256_mul_ps(g, _mm256_sub_ps(one, s)));
	*dg = _mm256_mul_ps(_mm256_mul_ps(_mm256_mul_ps(d, u), s), t);
}

AVX2 void rl_swiglu_bwd_h(float *dgate, float *dup, float *h, const float *dout, const float *gate, const float *up, long n) {
	long i = 0;
	__m256 dg, du, o;
	for (; i + 8 <= n; i += 8) {
		swiglu_bwd_h8(_mm256_loadu_ps(dout + i), _mm256_loadu_ps(gate + i), _mm256_loadu_ps(up + i), &dg, &du, &o);
		_mm256_storeu_ps(dgate + i, dg);
		_mm256_storeu_ps(dup + i, du);
		_mm256_storeu_ps(h + i, o);
	}
	if (i < n) {
		__m256i m = tailmask(n - i);
		swiglu_bwd_h8(_mm256_maskload_ps(dout + i, m), _mm256_maskload_ps(gate + i, m), _mm256_maskload_ps(up + i, m), &dg,
			&du, &o);
		_mm256_maskstore_ps(dgate + i, m, dg);
		_mm256_maskstore_ps(dup + i, m, du);
		_mm256_maskstore_ps(h + i, m, o);
	}
}

// rl_softmax_causal_lse turns rows r0..r1-1 of p [*,T] into the causal softmax:
// row r holds query t = r%T, whose entries lo..t become probabilities and the
// rest 0, lo = 0, or t-W+1 (at least 0) for a sliding window W > 0. lse[r]
// (if lse is not NULL) gets the log-sum-exp of row r's entries lo..t as they
// were.
AVX2 void rl_softmax_causal_lse(float *p, float *lse, long T, long r0, long r1, long W) {
	const __m256 ninf = _mm256_set1_ps(-INFINITY);
	for (long r = r0; r < r1; r++) {
		const long t = r % T, lo = W > 0 && t + 1 > W ? t + 1 - W : 0;
		for (long j = 0; j < lo; j++)
			p[r * T + j] = 0;
		float *row = p + r * T + lo;
		long len = t + 1 - lo, j;
		__m256 mv = ninf;
		for (j = 0; j + 8 <= len; j += 8)
			mv = _mm256_max_ps(mv, _mm256_loadu_ps(row + j));
		if (j < len) {
			__m256i m = tailmask(len - j);
			mv = _mm256_max_ps(mv, _mm256_blendv_ps(ninf, _mm256_maskload_ps(row + j, m), _mm256_castsi256_ps(m)));
		}
		__m256 mx = _mm256_set1_ps(hmax8(mv));
		__m256 sv = _mm256_setzero_ps();
		for (j = 0; j + 8 <= len; j += 8) {
			__m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(row + j), mx));
			_mm256_storeu_ps(row + j, e);
			sv = _mm256_add_ps(sv, e);
		}
		if (j < len) {
			__m256i m = tailmask(len - j);
			__m256 e = exp8(_mm256_sub_ps(_mm256_maskload_ps(row + j, m), mx));
			e = _mm256_and_ps(e, _mm256_castsi256_ps(m));
			_mm256_maskstore_ps(row + j, m, e);
			sv = _mm256_add_ps(sv, e);
		}
		float sum = hsum8(sv);
		if (lse)
			lse[r] = _mm256_cvtss_f32(mx) + logf(sum);
		__m256 inv = _mm256_set1_ps(1.0f / sum);
		for (j = 0; j + 8 <= len; j += 8)
			_mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), inv));
		for (; j < len; j++)
			row[j] *= _mm256_cvtss_f32(inv);
		for (j = len; j < T - lo; j++)
			row[j] = 0;
	}
}

// rl_softmax_causal is rl_softmax_causal_lse without the log-sum-exp.
AVX2 void rl_softmax_causal(float *p, long T, long r0, long r1, long W) { rl_softmax_causal_lse(p, NULL, T, r0, r1, W); }

// rl_logprob_fwd: rows n0..n1-1 of logits [*,V]: lse, entropy and the
// log-prob of the target (0 without one); sums in double, as in Go.
AVX2 void rl_logprob_fwd(float *logp, float *entropy, float *lse, const float *logits,
	const int32_t *targets, long n0, long n1, long V) {
	const __m256 ninf = _mm256_set1_ps(-INFINITY);
	for (long n = n0; n < n1; n++) {
		const float *z = logits + n * V;
		long j;
		__m256 mv = ninf;
		for (j = 0; j + 8 <= V; j += 8)
			mv = _mm256_max_ps(mv, _mm256_loadu_ps(z + j));
		if (j < V) {
			__m256i m = tailmask(V - j);
			mv = _mm256_max_ps(mv, _mm256_blendv_ps(ninf, _mm256_maskload_ps(z + j, m), _mm256_castsi256_ps(m)));
		}
		float mx = hmax8(mv);
		__m256 mxv = _mm256_set1_ps(mx);
		__m256d se0 = _mm256_setzero_pd(), se1 = _mm256_setzero_pd();
		__m256d sz0 = _mm256_setzero_pd(), sz1 = _mm256_setzero_pd();
		for (j = 0; j < V; j += 8) {
			__m256 d, dp; // dp: d in the product e*d (0 in the lanes past V)
			if (j + 8 <= V) {
				d = dp = _mm256_sub_ps(_mm256_loadu_ps(z + j), mxv);
			} else { // tail: lanes past V get e = exp(-Inf) = 0 and e*d = 0
				__m256i mi = tailmask(V - j);
				__m256 m = _mm256_castsi256_ps(mi);
				dp = _mm256_and_ps(_mm256_sub_ps(_mm256_maskload_ps(z + j, mi), mxv), m);
				d = _mm256_blendv_ps(ninf, dp, m);
			}
			__m256 e = exp8(d);
			__m256d e0 = _mm256_cvtps_pd(_mm256_castps256_ps128(e)), e1 = _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1));
			__m256d d0 = _mm256_cvtps_pd(_mm256_castps256_ps128(dp)), d1 = _mm256_cvtps_pd(_mm256_extractf128_ps(dp, 1));
			se0 = _mm256_add_pd(se0, e0);
			se1 = _mm256_add_pd(se1, e1);
			sz0 = _mm256_add_pd(sz0, _mm256_mul_pd(e0, d0));
			sz1 = _mm256_add_pd(sz1, _mm256_mul_pd(e1, d1));
		}
		double se = hsum4d(_mm256_add_pd(se0, se1)), sez = hsum4d(_mm256_add_pd(sz0, sz1));
		double l = log(se);
		lse[n] = mx + (float)l;
		entropy[n] = (float)(l - sez / se);
		int32_t t = targets[n];
		logp[n] = t >= 0 ? z[t] - lse[n] : 0;
	}
}

// rl_logprob_bwd: dlogits = dlogp*(onehot - p) - dentropy*p*(log p + H) for
// rows n0..n1-1; dlogits may alias logits.
AVX2 void rl_logprob_bwd(float *dlogits, const float *logits, const float *lse, const float *entropy,
	const int32_t *targets, const float *dlogp, const float *dentropy, long n0, long n1, long V) {
	for (long n = n0; n < n1; n++) {
		const float *z = logits + n * V;
		float *dz = dlogits + n * V;
		int32_t t = targets[n];
		float dl = t >= 0 ? dlogp[n] : 0;
		__m256 l = _mm256_set1_ps(lse[n]), H = _mm256_set1_ps(entropy[n]);
		__m256 ndl = _mm256_set1_ps(-dl), ndh = _mm256_set1_ps(-dentropy[n]);
		long j = 0;
		for (; j + 8 <= V; j += 8) {
			__m256 lp = _mm256_sub_ps(_mm256_loadu_ps(z + j), l);
			__m256 p = exp8(lp);
			__m256 a = _mm256_mul_ps(ndl, p);
			__m256 b = _mm256_mul_ps(_mm256_mul_ps(ndh, p), _mm256_add_ps(lp, H));
			_mm256_storeu_ps(dz + j, _mm256_add_ps(a, b));
		}
		if (j < V) {
			__m256i m = tailmask(V - j);
			__m256 lp = _mm256_sub_ps(_mm256_maskload_ps(z + j, m), l);
			__m256 p = exp8(lp);
			__m256 a = _mm256_mul_ps(ndl, p);
			__m256 b = _mm256_mul_ps(_mm256_mul_ps(ndh, p), _mm256_add_ps(lp, H));
			_mm256_maskstore_ps(dz + j, m, _mm256_add_ps(a, b));
		}
		if (t >= 0)
			dz[t] += dl;
	}
}

// rl_adamw is torch.optim.AdamW's step on n values, the arithmetic of the Go
// loop in backend.go (bc1, bc2: the bias corrections 1-beta^step).
AVX2 void rl_adamw(float *params, const float *grads, float *m, float *v, long n, float lr,
	float beta1, float beta2, float eps, float wd, float bc1, float bc2) {
	const __m256 b1 = _mm256_set1_ps(beta1), b2 = _mm256_set1_ps(beta2);
	const __m256 c1 = _mm256_set1_ps(1 - beta1), c2 = _mm256_set1_ps(1 - beta2);
	const __m256 decay = _mm256_set1_ps(1 - lr * wd), lrv = _mm256_set1_ps(lr), epsv = _mm256_set1_ps(eps);
	const __m256 bc1v = _mm256_set1_ps(bc1), bc2v = _mm256_set1_ps(bc2);
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 g = _mm256_loadu_ps(grads + i);
		__m256 mi = _mm256_add_ps(_mm256_mul_ps(b1, _mm256_loadu_ps(m + i)), _mm256_mul_ps(c1, g));
		__m256 vi = _mm256_add_ps(_mm256_mul_ps(b2, _mm256_loadu_ps(v + i)), _mm256_mul_ps(_mm256_mul_ps(c2, g), g));
		_mm256_storeu_ps(m + i, mi);
		_mm256_storeu_ps(v + i, vi);
		__m256 p = _mm256_mul_ps(_mm256_loadu_ps(params + i), decay);
		__m256 mhat = _mm256_div_ps(mi, bc1v), vhat = _mm256_div_ps(vi, bc2v);
		__m256 step = _mm256_div_ps(_mm256_mul_ps(lrv, mhat), _mm256_add_ps(_mm256_sqrt_ps(vhat), epsv));
		_mm256_storeu_ps(params + i, _mm256_sub_ps(p, step));
	}
	for (; i < n; i++) {
		float g = grads[i];
		float mi = beta1 * m[i] + (1 - beta1) * g;
		float vi = beta2 * v[i] + (1 - beta2) * g * g;
		m[i] = mi;
		v[i] = vi;
		float p = params[i] * (1 - lr * wd);
		float mhat = mi / bc1, vhat = vi / bc2;
		params[i] = p - lr * mhat / (sqrtf(vhat) + eps);
	}
}

// rl_exp is exp8 over n values, for the tests.
AVX2 void rl_exp(float *out, const float *x, long n) {
	long i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(out + i, exp8(_mm256_loadu_ps(x + i)));
	if (i < n) {
		__m256i m = tailmask(n - i);
		_mm256_maskstore_ps(out + i, m, exp8(_mm256_maskload_ps(x + i, m)));
	}
}

// rl_sumsq is sum(x^2): float32 partial sums over blocks of 256 values per
// lane, added up in double (as sumSquares in Go, 8 lanes at a time).
AVX2 double rl_sumsq(const float *x, long n) {
	__m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
	long i = 0;
	while (i + 8 <= n) {
		__m256 s = _mm256_setzero_ps();
		long end = i + 8 * 256 < n ? i + 8 * 256 : n;
		for (; i + 8 <= end; i += 8) {
			__m256 v = _mm256_loadu_ps(x + i);
			s = _mm256_fmadd_ps(v, v, s);
		}
		acc0 = _mm256_add_pd(acc0, _mm256_cvtps_pd(_mm256_castps256_ps128(s)));
		acc1 = _mm256_add_pd(acc1, _mm256_cvtps_pd(_mm256_extractf128_ps(s, 1)));
	}
	double total = hsum4d(_mm256_add_pd(acc0, acc1));
	for (; i < n; i++)
		total += (double)x[i] * x[i];
	return total;
}

// rl_scale multiplies x by s.
AVX2 void rl_scale(float *x, long n, float s) {
	__m256 sv = _mm256_set1_ps(s);
	long i = 0;
	for (; i + 8 <= n; i += 8)
		_mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), sv));
	for (; i < n; i++)
		x[i] *= s;
}

// dot3 is sum_i a_i*b_i*c_i (c may be NULL: sum a_i*b_i) over n values.
static inline AVX2 float dot3(const float *a, const float *b, const float *c, long n) {
	__m256 s = _mm256_setzero_ps();
	long i = 0;
	for (; i + 8 <= n; i += 8) {
		__m256 ab = _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i));
		s = c ? _mm256_fmadd_ps(ab, _mm256_loadu_ps(c + i), s) : _mm256_add_ps(ab, s);
	}
	float t = hsum8(s);
	for (; i < n; i++)
		t += c ? a[i] * b[i] * c[i] : a[i] * b[i];
	return t;
}

// rl_rmsnorm_fwd: rows lo..hi-1 of out [*,C] = inp * rstd * weight.
AVX2 void rl_rmsnorm_fwd(float *out, float *rstd, const float *inp, const float *weight, long lo, long hi, long C, float eps) {
	for (long n = lo; n < hi; n++) {
		const float *x = inp + n * C;
		float *o = out + n * C;
		float ss = dot3(x, x, 0, C);
		float r = (float)(1 / sqrt((double)(ss / (float)C + eps)));
		__m256 rv = _mm256_set1_ps(r);
		long i = 0;
		for (; i + 8 <= C; i += 8)
			_mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), rv), _mm256_loadu_ps(weight + i)));
		for (; i < C; i++)
			o[i] = x[i] * r * weight[i];
		rstd[n] = r;
	}
}

// rl_residual_rmsnorm_fwd: rows lo..hi-1 of res [*,C] = a + b (res may alias
// a or b) and out = res * rstd * weight, in one pass over a and b: each row's
// sum is written and squared in the same loop, and the scaling re-reads it
// from cache. The sums of squares are dot3's (the same lanes and order), so
// the results equal ResidualForward's followed by rl_rmsnorm_fwd exactly.
AVX2 void rl_residual_rmsnorm_fwd(float *res, float *out, float *rstd, const float *a, const float *b, const float *weight,
	long lo, long hi, long C, float eps) {
	for (long n = lo; n < hi; n++) {
		const float *x = a + n * C, *y = b + n * C;
		float *s = res + n * C, *o = out + n * C;
		__m256 acc = _mm256_setzero_ps();
		long i = 0;
		for (; i + 8 <= C; i += 8) {
			__m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i));
			_mm256_storeu_ps(s + i, v);
			acc = _mm256_add_ps(_mm256_mul_ps(v, v), acc);
		}
		float ss = hsum8(acc);
		for (; i < C; i++) {
			float v = x[i] + y[i];
			s[i] = v;
			ss += v * v;
		}
		float r = (float)(1 / sqrt((double)(ss / (float)C + eps)));
		__m256 rv = _mm256_set1_ps(r);
		i = 0;
		for (; i + 8 <= C; i += 8)
			_mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(s + i), rv), _mm256_loadu_ps(weight + i)));
		for (; i < C; i++)
			o[i] = s[i] * r * weight[i];
		rstd[n] = r;
	}
}

// rl_rmsnorm_bwd_dinp: rows lo..hi-1 of
// dinp = rstd * (w*dout - x * rstd^2 * mean(w*dout*x)).
AVX2 void rl_rmsnorm_bwd_dinp(float *dinp, const float *dout, const float *inp, const float *weight, const float *rstd,
	long lo, long hi, long C) {
	for (long n = lo; n < hi; n++) {
		const float *x = inp + n * C, *d = dout + n * C;
		float *di = dinp + n * C;
		float r = rstd[n];
		float c = r * r * dot3(weight, d, x, C) / (float)C;
		__m256 rv = _mm256_set1_ps(r), cv = _mm256_set1_ps(c);
		long i = 0;
		for (; i + 8 <= C; i += 8) {
			__m256 wd = _mm256_mul_ps(_mm256_loadu_ps(weight + i), _mm256_loadu_ps(d + i));
			__m256 xc = _mm256_mul_ps(_mm256_loadu_ps(x + i), cv);
			_mm256_storeu_ps(di + i, _mm256_mul_ps(rv, _mm256_sub_ps(wd, xc)));
		}
		for (; i < C; i++)
			di[i] = r * (weight[i] * d[i] - x[i] * c);
	}
}

// rl_rmsnorm_bwd_dw: dweight[c0..c1-1] += sum over the N rows of dout*x*rstd,
// row by row (the Go loop's order and arithmetic). dout2 is NULL, or a second
// output gradient added to dout element by element first.
static inline __attribute__((always_inline)) AVX2 void rmsnorm_bwd_dw(float *dweight, const float *dout,
	const float *dout2, const float *inp, const float *rstd, long N, long C, long c0, long c1, const int two) {
	for (long n = 0; n < N; n++) {
		const float *x = inp + n * C, *d = dout + n * C, *d2 = two ? dout2 + n * C : 0;
		__m256 rv = _mm256_set1_ps(rstd[n]);
		long i = c0;
		for (; i + 8 <= c1; i += 8) {
			__m256 dv = _mm256_loadu_ps(d + i);
			if (two)
				dv = _mm256_add_ps(dv, _mm256_loadu_ps(d2 + i));
			__m256 t = _mm256_mul_ps(_mm256_mul_ps(dv, _mm256_loadu_ps(x + i)), rv);
			_mm256_storeu_ps(dweight + i, _mm256_add_ps(_mm256_loadu_ps(dweight + i), t));
		}
		for (; i < c1; i++)
			dweight[i] += (two ? d[i] + d2[i] : d[i]) * x[i] * rstd[n];
	}
}

AVX2 void rl_rmsnorm_bwd_dw(float *dweight, const float *dout, const float *dout2, const float *inp, const float *rstd,
	long N, long C, long c0, long c1) {
	if (dout2)
		rmsnorm_bwd_dw(dweight, dout, dout2, inp, rstd, N, C, c0, c1, 1);
	else
		rmsnorm_bwd_dw(dweight, dout, 0, inp, rstd, N, C, c0, c1, 0);
}

// rl_rmsnorm_bwd_dinp_add: rows lo..hi-1 of
// dinp += rstd * (w*d - x * rstd^2 * mean(w*d*x)), d = dout (+ dout2 unless
// NULL): the norm's input gradient added into the residual stream's in the
// pass that computes it.
static inline __attribute__((always_inline)) AVX2 void rmsnorm_bwd_dinp_add(float *dinp, const float *dout,
	const float *dout2, const float *inp, const float *weight, const float *rstd, long lo, long hi, long C, const int two) {
	for (long n = lo; n < hi; n++) {
		const float *x = inp + n * C, *d = dout + n * C, *d2 = two ? dout2 + n * C : 0;
		float *di = dinp + n * C;
		float r = rstd[n];
		__m256 s = _mm256_setzero_ps();
		long i = 0;
		for (; i + 8 <= C; i += 8) {
			__m256 dv = _mm256_loadu_ps(d + i);
			if (two)
				dv = _mm256_add_ps(dv, _mm256_loadu_ps(d2 + i));
			s = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_loadu_ps(weight + i), dv), _mm256_loadu_ps(x + i), s);
		}
		float dot = hsum8(s);
		for (; i < C; i++)
			dot += weight[i] * (two ? d[i] + d2[i] : d[i]) * x[i];
		float c = r * r * dot / (float)C;
		__m256 rv = _mm256_set1_ps(r), cv = _mm256_set1_ps(c);
		i = 0;
		for (; i + 8 <= C; i += 8) {
			__m256 dv = _mm256_loadu_ps(d + i);
			if (two)
				dv = _mm256_add_ps(dv, _mm256_loadu_ps(d2 + i));
			__m256 wd = _mm256_mul_ps(_mm256_loadu_ps(weight + i), dv);
			__m256 xc = _mm256_mul_ps(_mm256_loadu_ps(x + i), cv);
			_mm256_storeu_ps(di + i, _mm256_add_ps(_mm256_loadu_ps(di + i), _mm256_mul_ps(rv, _mm256_sub_ps(wd, xc))));
		}
		for (; i < C; i++)
			di[i] += r * (weight[i] * (two ? d[i] + d2[i] : d[i]) - x[i] * c);
	}
}

AVX2 void rl_rmsnorm_bwd_dinp_add(float *dinp, const float *dout, const float *dout2, const float *inp,
	const float *weight, const float *rstd, long lo, long hi, long C) {
	if (dout2)
		rmsnorm_bwd_dinp_add(dinp, dout, dout2, inp, weight, rstd, lo, hi, C, 1);
	else
		rmsnorm_bwd_dinp_add(dinp, dout, 0, inp, weight, rstd, lo, hi, C, 0);
}

// softmax_unnorm overwrites s[0..P) with exp(s - max) and returns 1/sum.
static inline AVX2 float softmax_unnorm(float *s, long P) {
	float m = s[0];
	for (long j = 1; j < P; j++)
		m = s[j] > m ? s[j] : m;
	const __m256 mv = _mm256_set1_ps(m);
	__m256 sum = _mm256_setzero_ps();
	long j = 0;
	for (; j + 8 <= P; j += 8) {
		const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(s + j), mv));
		_mm256_storeu_ps(s + j, e);
		sum = _mm256_add_ps(sum, e);
	}
	if (j < P) {
		const __m256i tm = tailmask(P - j);
		const __m256 e = _mm256_and_ps(exp8(_mm256_sub_ps(_mm256_maskload_ps(s + j, tm), mv)),
			_mm256_castsi256_ps(tm));
		_mm256_maskstore_ps(s + j, tm, e);
		sum = _mm256_add_ps(sum, e);
	}
	return 1 / hsum8(sum);
}

// cached_row is the cache row of position j0 + j of a slot of R rows (a
// rolling window's cache when R is shorter than the positions).
static inline long cached_row(long j0, long j, long R) {
	const long p = j0 + j;
	return p < R ? p : p % R;
}

// rl_attention_cached: attention of one token through the KV cache for the
// work items lo..hi-1, item r = (token n = r / NKV, kv head kh = r % NKV) with
// its G = NH/NKV query heads (each key and value row is loaded once for the
// group). Token n sits at position pos[n] of cache slot slot[n] and attends to
// positions j0..pos[n], j0 = 0 or, with a sliding window W > 0, pos[n]-W+1
// (at least 0); position j sits in row j%R of its slot's R rows. HD is a
// multiple of 8, G <= 8; s holds G*maxLen floats of scratch (maxLen >= every
// span's length).
AVX2 void rl_attention_cached(float *out, const float *q, const float *kc, const float *vc, const int32_t *slot,
	const int32_t *pos, long NH, long NKV, long HD, long R, long W, long lo, long hi, float scale, float *s, long maxLen) {
	const long G = NH / NKV, KD = NKV * HD;
	for (long r = lo; r < hi; r++) {
		const long n = r / NKV, kh = r % NKV, j0 = W > 0 && pos[n] + 1 > W ? pos[n] + 1 - W : 0;
		const long P = (long)pos[n] + 1 - j0;
		const float *kb = kc + (long)slot[n] * R * KD + kh * HD;
		const float *vb = vc + (long)slot[n] * R * KD + kh * HD;
		const float *qh = q + (n * NH + kh * G) * HD;
		float *oh = out + (n * NH + kh * G) * HD;
		long j = 0;
		for (; j + 4 <= P; j += 4) { // 4 positions at once: 4G independent sums
			__m256 acc[8][4];
			for (long g = 0; g < G; g++)
				for (int u = 0; u < 4; u++)
					acc[g][u] = _mm256_setzero_ps();
			for (long c = 0; c < HD; c += 8) {
				__m256 kv[4];
				for (int u = 0; u < 4; u++)
					kv[u] = _mm256_loadu_ps(kb + cached_row(j0, j + u, R) * KD + c);
				for (long g = 0; g < G; g++) {
					const __m256 qv = _mm256_loadu_ps(qh + g * HD + c);
					for (int u = 0; u < 4; u++)
						acc[g][u] = _mm256_fmadd_ps(qv, kv[u], acc[g][u]);
				}
			}
			for (long g = 0; g < G; g++)
				for (int u = 0; u < 4; u++)
					s[g * maxLen + j + u] = hsum8(acc[g][u]) * scale;
		}
		for (; j < P; j++) {
			__m256 acc[8];
			for (long g = 0; g < G; g++)
				acc[g] = _mm256_setzero_ps();
			for (long c = 0; c < HD; c += 8) {
				const __m256 kv = _mm256_loadu_ps(kb + cached_row(j0, j, R) * KD + c);
				for (long g = 0; g < G; g++)
					acc[g] = _mm256_fmadd_ps(_mm256_loadu_ps(qh + g * HD + c), kv, acc[g]);
			}
			for (long g = 0; g < G; g++)
				s[g * maxLen + j] = hsum8(acc[g]) * scale;
		}
		float inv[8];
		for (long g = 0; g < G; g++)
			inv[g] = softmax_unnorm(s + g * maxLen, P);
		for (long c0 = 0; c0 < HD; c0 += 32) { // 32 columns at once: 4G independent sums
			const int nc = HD - c0 >= 32 ? 4 : (int)((HD - c0) / 8);
			__m256 acc[8][4];
			for (long g = 0; g < G; g++)
				for (int u = 0; u < nc; u++)
					acc[g][u] = _mm256_setzero_ps();
			for (long j = 0; j < P; j++) {
				__m256 vv[4];
				const float *vr = vb + cached_row(j0, j, R) * KD + c0;
				for (int u = 0; u < nc; u++)
					vv[u] = _mm256_loadu_ps(vr + 8 * u);
				for (long g = 0; g < G; g++) {
					const __m256 pb = _mm256_set1_ps(s[g * maxLen + j]);
					for (int u = 0; u < nc; u++)
						acc[g][u] = _mm256_fmadd_ps(pb, vv[u], acc[g][u]);
				}
			}
			for (long g = 0; g < G; g++)
				for (int u = 0; u < nc; u++)
					_mm256_storeu_ps(oh + g * HD + c0 + 8 * u, _mm256_mul_ps(acc[g][u], _mm256_set1_ps(inv[g])));
		}
	}
}

// rl_exp_shift writes out[i] = exp((x[i] - m) * s) and returns their sum,
// float32 partial sums per lane over blocks of 256 values, added in double.
AVX2 double rl_exp_shift(float *out, const float *x, long n, float m, float s) {
	const __m256 mv = _mm256_set1_ps(m), sv = _mm256_set1_ps(s);
	__m256d acc = _mm256_setzero_pd();
	long i = 0;
	while (i < n) {
		const long end = i + 256 < n ? i + 256 : n;
		__m256 part = _mm256_setzero_ps();
		for (; i + 8 <= end; i += 8) {
			const __m256 e = exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), mv), sv));
			_mm256_storeu_ps(out + i, e);
			part = _mm256_add_ps(part, e);
		}
		if (i < end) {
			const __m256i tm = tailmask(end - i);
			const __m256 e = _mm256_and_ps(exp8(_mm256_mul_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, tm), mv), sv)),
				_mm256_castsi256_ps(tm));
			_mm256_maskstore_ps(out + i, tm, e);
			part = _mm256_add_ps(part, e);
			i = end;
		}
		acc = _mm256_add_pd(acc, _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(part)),
			_mm256_cvtps_pd(_mm256_extractf128_ps(part, 1))));
	}
	return hsum4d(acc);
}

// AVX-512 cached attention: the item loop of rl_attention_cached with the
// group size G a compile-time constant (the accumulators stay in registers)
// and 16-lane rows; HD a multiple of 16.
#define AVX512 __attribute__((target("avx512f,avx512dq,avx2,fma")))

int rl_have_avx512(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") && rl_have_avx2();
}

static inline AVX512 __attribute__((always_inline)) void att_item512(const int G, float *oh, const float *qh,
	const float *kb, const float *vb, long j0, long P, long R, long HD, long KD, float scale, float *s, long maxLen) {
	long j = 0;
	for (; j + 4 <= P; j += 4) {
		__m512 acc[G][4];
		for (int g = 0; g < G; g++)
			for (int u = 0; u < 4; u++)
				acc[g][u] = _mm512_setzero_ps();
		for (long c = 0; c < HD; c += 16) {
			__m512 kv[4];
			for (int u = 0; u < 4; u++)
				kv[u] = _mm512_loadu_ps(kb + cached_row(j0, j + u, R) * KD + c);
			for (int g = 0; g < G; g++) {
				const __m512 qv = _mm512_loadu_ps(qh + g * HD + c);
				for (int u = 0; u < 4; u++)
					acc[g][u] = _mm512_fmadd_ps(qv, kv[u], acc[g][u]);
			}
		}
		for (int g = 0; g < G; g++)
			for (int u = 0; u < 4; u++)
				s[g * maxLen + j + u] = _mm512_reduce_add_ps(acc[g][u]) * scale;
	}
	for (; j < P; j++) {
		__m512 acc[G];
		for (int g = 0; g < G; g++)
			acc[g] = _mm512_setzero_ps();
		for (long c = 0; c < HD; c += 16) {
			const __m512 kv = _mm512_loadu_ps(kb + cached_row(j0, j, R) * KD + c);
			for (int g = 0; g < G; g++)
				acc[g] = _mm512_fmadd_ps(_mm512_loadu_ps(qh + g * HD + c), kv, acc[g]);
		}
		for (int g = 0; g < G; g++)
			s[g * maxLen + j] = _mm512_reduce_add_ps(acc[g]) * scale;
	}
	float inv[G];
	for (int g = 0; g < G; g++)
		inv[g] = softmax_unnorm(s + g * maxLen, P);
	for (long c0 = 0; c0 < HD; c0 += 64) {
		const int nc = HD - c0 >= 64 ? 4 : (int)((HD - c0) / 16);
		__m512 acc[G][4];
		for (int g = 0; g < G; g++)
			for (int u = 0; u < 4; u++)
				acc[g][u] = _mm512_setzero_ps();
		if (nc == 4) {
			for (long jj = 0; jj < P; jj++) {
				__m512 vv[4];
				const float *vr = vb + cached_row(j0, jj, R) * KD + c0;
				for (int u = 0; u < 4; u++)
					vv[u] = _mm512_loadu_ps(vr + 16 * u);
				for (int g = 0; g < G; g++) {
					const __m512 pb = _mm512_set1_ps(s[g * maxLen + jj]);
					for (int u = 0; u < 4; u++)
						acc[g][u] = _mm512_fmadd_ps(pb, vv[u], acc[g][u]);
				}
			}
		} else {
			for (long jj = 0; jj < P; jj++)
				for (int g = 0; g < G; g++) {
					const __m512 pb = _mm512_set1_ps(s[g * maxLen + jj]);
					for (int u = 0; u < nc; u++)
						acc[g][u] = _mm512_fmadd_ps(pb, _mm512_loadu_ps(vb + cached_row(j0, jj, R) * KD + c0 + 16 * u), acc[g][u]);
				}
		}
		for (int g = 0; g < G; g++)
			for (int u = 0; u < nc; u++)
				_mm512_storeu_ps(oh + g * HD + c0 + 16 * u, _mm512_mul_ps(acc[g][u], _mm512_set1_ps(inv[g])));
	}
}

// rl_attention_cached_avx512 is rl_attention_cached for HD a multiple of 16
// and G = NH/NKV <= 8.
AVX512 void rl_attention_cached_avx512(float *out, const float *q, const float *kc, const float *vc,
	const int32_t *slot, const int32_t *pos, long NH, long NKV, long HD, long R, long W, long lo, long hi, float scale,
	float *s, long maxLen) {
	const long G = NH / NKV, KD = NKV * HD;
	for (long r = lo; r < hi; r++) {
		const long n = r / NKV, kh = r % NKV, j0 = W > 0 && pos[n] + 1 > W ? pos[n] + 1 - W : 0;
		const long P = (long)pos[n] + 1 - j0;
		const float *kb = kc + (long)slot[n] * R * KD + kh * HD;
		const float *vb = vc + (long)slot[n] * R * KD + kh * HD;
		const float *qh = q + (n * NH + kh * G) * HD;
		float *oh = out + (n * NH + kh * G) * HD;
		switch (G) {
		case 1: att_item512(1, oh, qh, kb, vb, j0, P, R, HD, KD, scale, s, maxLen); break;
		case 2: att_item512(2, oh, qh, kb, vb, j0, P, R, HD, KD, scale, s, maxLen); break;
		case 3: att_item512(3, oh, qh, kb, vb, j0, P, R, HD, KD, scale, s, maxLen); break;
		case 4: att_item512(4, oh, qh, kb, vb, j0, P, R, HD, KD, scale, s, maxLen); break;
		case 5: att_item512(5, oh, qh, kb, vb, j0, P, R, HD, KD, scale, s, maxLen); break;
		case 6: att_item512(6, oh, qh, kb, vb, j0, P, R, HD, KD, scale, s, maxLen); break;
		case 7: att_item512(7, oh, qh, kb, vb, j0, P, R, HD, KD, scale, s, maxLen); break;
		default: att_item512(8, oh, qh, kb, vb, j0, P, R, HD, KD, scale, s, maxLen); break;
		}
	}
}

// The cached attention over the thread pool (pool.h): the work items
// [0, N*NKV) in nparts contiguous ranges, each part with its own score
// buffer of NH/NKV*maxLen floats.
struct attn_job {
	float *out;
	const float *q, *kc, *vc;
	const int32_t *slot, *pos;
	long NH, NKV, HD, R, W, items, maxLen;
	float scale;
	int avx512;
};

static void attn_part(void *ctx, int p, int n) {
	const struct attn_job *j = ctx;
	const long lo = j->items * p / n, hi = j->items * (p + 1) / n;
	if (lo >= hi) return;
	static __thread float *s;
	static __thread long cap;
	const long need = j->NH / j->NKV * j->maxLen;
	if (cap < need) {
		free(s);
		s = malloc(sizeof(float) * (size_t)need);
		cap = s ? need : 0;
		if (!s) abort();
	}
	if (j->avx512)
		rl_attention_cached_avx512(j->out, j->q, j->kc, j->vc, j->slot, j->pos, j->NH, j->NKV, j->HD, j->R, j->W, lo, hi,
		                           j->scale, s, j->maxLen);
	else
		rl_attention_cached(j->out, j->q, j->kc, j->vc, j->slot, j->pos, j->NH, j->NKV, j->HD, j->R, j->W, lo, hi,
		                    j->scale, s, j->maxLen);
}

void rl_attention_cached_mt(int nparts, int avx512, float *out, const float *q, const float *kc, const float *vc,
	const int32_t *slot, const int32_t *pos, long N, long NH, long NKV, long HD, long R, long W, float scale, long maxLen) {
	struct attn_job j = {out, q, kc, vc, slot, pos, NH, NKV, HD, R, W, N * NKV, maxLen, scale, avx512};
	rl_pool_run(attn_part, &j, nparts);
}

// SwiGLU forward over the thread pool: between the products of a decode step, where the pool's
// helpers are spinning, this avoids waking a goroutine.
struct swiglu_job {
	float *out;
	const float *gate, *up;
	long n;
};

static void swiglu_part(void *ctx, int p, int n) {
	const struct swiglu_job *j = ctx;
	// ranges in whole 8-lane steps, so that only the last part has a tail
	const long steps = (j->n + 7) / 8, lo = 8 * (steps * p / n), hi = 8 * (steps * (p + 1) / n);
	const long end = hi < j->n ? hi : j->n;
	if (lo < end) rl_swiglu_fwd(j->out + lo, j->gate + lo, j->up + lo, end - lo);
}

void rl_swiglu_fwd_mt(int nparts, float *out, const float *gate, const float *up, long n) {
	struct swiglu_job j = {out, gate, up, n};
	rl_pool_run(swiglu_part, &j, nparts);
}
