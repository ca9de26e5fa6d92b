// The body of the reduced-precision kernels, compiled once per instruction
// set (lowp_generic.c, lowp_avx2.c, lowp_avx512.c define LOWP_FN, LOWP_ISA
// and the target). GCC vector extensions: a v16 is one zmm register with AVX-512,
// two ymm with AVX2, four xmm otherwise.
#include <string.h>
#include "lowp.h"
#if LOWP_ISA != LOWP_ISA_GENERIC
#include <immintrin.h>
#endif

#pragma GCC diagnostic ignored "-Wpsabi"

#ifndef LOWP_PF_LOC
#define LOWP_PF_LOC 2 // prefetch the next weights into L2 (prefetcht1)
#endif

typedef float v16f __attribute__((vector_size(64)));
typedef int32_t v16i __attribute__((vector_size(64)));
typedef uint32_t v16u __attribute__((vector_size(64)));
typedef uint16_t v16h __attribute__((vector_size(32)));

static inline __attribute__((always_inline)) v16f ld(const float *p) {
	v16f v;
	memcpy(&v, p, sizeof v);
	return v;
}
#define st(p, v)                                                                          \
	do {                                                                              \
		const v16f st_v_ = (v);                                                   \
		memcpy((p), &st_v_, sizeof st_v_);                                        \
	} while (0)

// red4 sums each of v[0..3] over its 16 lanes: [sum v0, sum v1, sum v2, sum v3].
// The tree is the same for every vector and every instruction set: within each
// group of 4 lanes (l0+l2)+(l1+l3), then the groups (g0+g2)+(g1+g3).
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
static inline __attribute__((always_inline)) v4f red4(const v16f *v4) {
	const v16f a = v4[0], b = v4[1], c = v4[2], d = v4[3];
	const v16f t0 = __builtin_shufflevector(a, b, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29) +
	                __builtin_shufflevector(a, b, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
	const v16f t1 = __builtin_shufflevector(c, d, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29) +
	                __builtin_shufflevector(c, d, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
	// per group of 4 lanes: t0 = [a02 b02 a13 b13], t1 = [c02 d02 c13 d13]
	const v16f u = __builtin_shufflevector(t0, t1, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29) +
	               __builtin_shufflevector(t0, t1, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31);
	// u = [a b c d] per group
	const v8f v = __builtin_shufflevector(u, u, 0, 1, 2, 3, 4, 5, 6, 7) +
	              __builtin_shufflevector(u, u, 8, 9, 10, 11, 12, 13, 14, 15);
	return __builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7);
}

// dequant writes row o of W as K floats to dst.
static inline void dequant(int dtype, float *dst, const float *wf, const uint16_t *wb, const int8_t *wq,
                           const float *s, int K, int o) {
	if (dtype == LOWP_F32) {
		memcpy(dst, wf + (long)o * K, sizeof(float) * (size_t)K);
		return;
	}
	if (dtype == LOWP_BF16) {
		const uint16_t *r = wb + (long)o * K;
		int k = 0;
		for (; k + 16 <= K; k += 16) {
			v16h h;
			memcpy(&h, r + k, sizeof h);
			v16u u = __builtin_convertvector(h, v16u) << 16;
			v16f f;
			memcpy(&f, &u, sizeof f);
			st(dst + k, f);
		}
		for (; k < K; k++) {
			uint32_t u = (uint32_t)r[k] << 16;
			memcpy(dst + k, &u, 4);
		}
		return;
	}
	const int nb = (K + LOWP_BLOCK - 1) / LOWP_BLOCK;
	const int8_t *r = wq + (long)o * K;
	const float *sr = s + (long)o * nb;
	int k = 0;
	for (int b = 0; b < nb; b++) {
		const float d = sr[b];
		const int end = b * LOWP_BLOCK + LOWP_BLOCK < K ? b * LOWP_BLOCK + LOWP_BLOCK : K;
		for (; k + 16 <= end; k += 16) {
#if LOWP_ISA == LOWP_ISA_AVX512
			const __m128i q = _mm_loadu_si128((const __m128i *)(r + k));
			_mm512_storeu_ps(dst + k, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)),
			                                        _mm512_set1_ps(d)));
#elif LOWP_ISA == LOWP_ISA_AVX2
			const __m128i q = _mm_loadu_si128((const __m128i *)(r + k));
			const __m256 dv = _mm256_set1_ps(d);
			_mm256_storeu_ps(dst + k, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q)), dv));
			_mm256_storeu_ps(dst + k + 8, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8))), dv));
#else
			for (int i = 0; i < 16; i++) dst[k + i] = (float)r[k + i] * d;
#endif
		}
		for (; k < end; k++) dst[k] = (float)r[k] * d;
	}
}

// wrows are the 4 weight rows of a tile: fp32 (f: the weights in place or a
// dequantised copy in L1), bfloat16 (h) or int8 with their block scales (q, s).
struct wrows {
	const float *f[4];
	const uint16_t *h[4];
	const int8_t *q[4];
	const float *s[4];
};

typedef int8_t v16c __attribute__((vector_size(16)));

// wload is row j's weights k..k+15 as fp32: exactly the values dequant
// writes, so a tile gives the same sums from the rows as from their copy.
static inline __attribute__((always_inline)) v16f wload(const int dtype, const struct wrows *r, int j, int k) {
	if (dtype == LOWP_F32) return ld(r->f[j] + k);
	if (dtype == LOWP_BF16) {
		v16h h;
		memcpy(&h, r->h[j] + k, sizeof h);
		const v16u u = __builtin_convertvector(h, v16u) << 16;
		v16f f;
		memcpy(&f, &u, sizeof f);
		return f;
	}
	const float d = r->s[j][k / LOWP_BLOCK];
#if LOWP_ISA == LOWP_ISA_AVX512
	const __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(r->q[j] + k)))),
	                               _mm512_set1_ps(d));
	v16f v;
	memcpy(&v, &f, sizeof v);
	return v;
#else
	v16c q;
	memcpy(&q, r->q[j] + k, sizeof q);
	return __builtin_convertvector(__builtin_convertvector(q, v16i), v16f) * d;
#endif
}

// wval is one weight of row j (for the K % 16 tail).
static inline __attribute__((always_inline)) float wval(const int dtype, const struct wrows *r, int j, int k) {
	if (dtype == LOWP_F32) return r->f[j][k];
	if (dtype == LOWP_BF16) {
		const uint32_t u = (uint32_t)r->h[j][k] << 16;
		float f;
		memcpy(&f, &u, 4);
		return f;
	}
	return (float)r->q[j][k] * r->s[j][k / LOWP_BLOCK];
}

// tile: out[n+i, o..o+4) for i < nx from the 4 weight rows r, read as dtype.
// Accumulation: 16 lanes over k (the K % 16 tail zero-padded), then red4:
// the same for every tile shape and weight source, so a row's result does not
// depend on its batch. While it runs, the tile touches pf_n cache lines from
// pf (the next group's weights), a few per step of k, so that memory streams
// while the products compute.
static inline __attribute__((always_inline)) void tile(const int dtype, const int nx, float *out,
                                                      const float *x, const struct wrows *r,
                                                      const float *bias, int n, int K, int OC, int o,
                                                      int no, const char *pf, int pf_n) {
	v16f acc[4][4];
	for (int i = 0; i < nx; i++)
		for (int j = 0; j < 4; j++) acc[i][j] = (v16f){0};
	const int steps = K / 16, per = steps > 0 ? (pf_n + steps - 1) / steps : 0;
	int k = 0;
	for (; k + 16 <= K; k += 16) {
		for (int p = 0; p < per && pf_n > 0; p++, pf_n--, pf += 64) __builtin_prefetch(pf, 0, LOWP_PF_LOC);
		const v16f w0 = wload(dtype, r, 0, k), w1 = wload(dtype, r, 1, k), w2 = wload(dtype, r, 2, k),
		           w3 = wload(dtype, r, 3, k);
		for (int i = 0; i < nx; i++) {
			const v16f xv = ld(x + (long)(n + i) * K + k);
			acc[i][0] += xv * w0;
			acc[i][1] += xv * w1;
			acc[i][2] += xv * w2;
			acc[i][3] += xv * w3;
		}
	}
	if (k < K) { // the K % 16 tail: one more step on zero-padded vectors
		v16f wt[4];
		for (int j = 0; j < 4; j++) {
			wt[j] = (v16f){0};
			for (int kk = k; kk < K; kk++) wt[j][kk - k] = wval(dtype, r, j, kk);
		}
		for (int i = 0; i < nx; i++) {
			v16f xv = {0};
			memcpy(&xv, x + (long)(n + i) * K + k, sizeof(float) * (size_t)(K - k));
			for (int j = 0; j < 4; j++) acc[i][j] += xv * wt[j];
		}
	}
	for (int i = 0; i < nx; i++) {
		const v4f rs = red4(acc[i]);
		for (int j = 0; j < no; j++) {
			float sum = rs[j];
			if (bias) sum += bias[o + j];
			out[(long)(n + i) * OC + o + j] = sum;
		}
	}
}

#if LOWP_ISA == LOWP_ISA_AVX2
// The fp32 tiles for AVX2's 16 ymm registers: the same 16 lanes over k (each
// v16 as two ymm halves), the same zero-padded tail and red4 as tile, so a
// row's sums do not depend on its batch. a[i][j][h] is x row i against weight
// row j, lanes 8h..8h+7. No software prefetch: the hardware's streams the
// weights faster here (measured, docs/compute.md).

// span_f32_avx2 adds k in [k0, k1) (multiples of 16) to a for nx (1 or 2)
// rows of x. One row keeps both halves' 8 accumulators in registers; two rows
// take the low half over the span, then the high half (8 accumulators each).
static inline __attribute__((always_inline)) void span_f32_avx2(const int nx, __m256 a[2][4][2],
                                                               const float *x0, const float *x1,
                                                               const struct wrows *r, int k0, int k1) {
	const float *const *w = r->f;
	if (nx == 1) {
		__m256 c[4][2]; // [weight row][half]
		for (int j = 0; j < 4; j++) c[j][0] = a[0][j][0], c[j][1] = a[0][j][1];
		for (int k = k0; k < k1; k += 16) {
			const __m256 xl = _mm256_loadu_ps(x0 + k), xh = _mm256_loadu_ps(x0 + k + 8);
			for (int j = 0; j < 4; j++) {
				c[j][0] = _mm256_fmadd_ps(xl, _mm256_loadu_ps(w[j] + k), c[j][0]);
				c[j][1] = _mm256_fmadd_ps(xh, _mm256_loadu_ps(w[j] + k + 8), c[j][1]);
			}
		}
		for (int j = 0; j < 4; j++) a[0][j][0] = c[j][0], a[0][j][1] = c[j][1];
		return;
	}
	for (int h = 0; h < 2; h++) {
		__m256 c[2][4]; // [x row][weight row], lanes of half h
		for (int j = 0; j < 4; j++) c[0][j] = a[0][j][h], c[1][j] = a[1][j][h];
		for (int k = k0 + 8 * h; k < k1; k += 16) {
			const __m256 xa = _mm256_loadu_ps(x0 + k), xb = _mm256_loadu_ps(x1 + k);
			for (int j = 0; j < 4; j++) {
				// each weight vector loaded once into a register (not folded
				// into both FMAs as a second load)
				__m256 wv = _mm256_loadu_ps(w[j] + k);
				__asm__("" : "+x"(wv));
				c[0][j] = _mm256_fmadd_ps(xa, wv, c[0][j]);
				c[1][j] = _mm256_fmadd_ps(xb, wv, c[1][j]);
			}
		}
		for (int j = 0; j < 4; j++) a[0][j][h] = c[0][j], a[1][j][h] = c[1][j];
	}
}

// finish_f32_avx2 adds the K % 16 tail (one more step on zero-padded
// vectors), reduces with red4 and writes out[n+i, o..o+no) for i < nx.
static inline __attribute__((always_inline)) void finish_f32_avx2(const int nx, __m256 a[2][4][2],
                                                                 float *out, const float *x, const struct wrows *r,
                                                                 const float *bias, int n, int K, int OC, int o,
                                                                 int no) {
	const int K16 = K & ~15;
	if (K16 < K) {
		float wt[4][16] = {{0}}, xt[2][16] = {{0}};
		for (int j = 0; j < 4; j++) memcpy(wt[j], r->f[j] + K16, sizeof(float) * (size_t)(K - K16));
		for (int i = 0; i < nx; i++) memcpy(xt[i], x + (long)(n + i) * K + K16, sizeof(float) * (size_t)(K - K16));
		for (int i = 0; i < nx; i++)
			for (int j = 0; j < 4; j++)
				for (int h = 0; h < 2; h++)
					a[i][j][h] = _mm256_fmadd_ps(_mm256_loadu_ps(xt[i] + 8 * h),
					                             _mm256_loadu_ps(wt[j] + 8 * h), a[i][j][h]);
	}
	for (int i = 0; i < nx; i++) {
		v16f acc[4];
		for (int j = 0; j < 4; j++) {
			memcpy(&acc[j], &a[i][j][0], 32);
			memcpy((char *)&acc[j] + 32, &a[i][j][1], 32);
		}
		const v4f rs = red4(acc);
		for (int j = 0; j < no; j++) {
			float sum = rs[j];
			if (bias) sum += bias[o + j];
			out[(long)(n + i) * OC + o + j] = sum;
		}
	}
}

// rows_f32_avx2 is rows for fp32 weights: x rows by pairs (an odd last row
// alone). More than 4 rows go by blocks of 16 rows and spans of k short
// enough that the block's x stays in L1 with the 4 weight rows; the
// accumulators wait in memory between spans (the same values: a span adds
// to each lane in the order of k, as one pass would).
static inline void rows_f32_avx2(float *out, const float *x, const struct wrows *r, const float *bias, int N,
                                 int K, int OC, int o, int no) {
	enum { NB = 16, KC = 512 };
	const int K16 = K & ~15, kc = N > 4 ? KC : K16 + 16;
	__m256 acc[NB / 2][2][4][2];
	for (int n0 = 0; n0 < N; n0 += NB) {
		const int nb = N - n0 < NB ? N - n0 : NB;
		for (int p = 0; p < (nb + 1) / 2; p++)
			for (int i = 0; i < 2; i++)
				for (int j = 0; j < 4; j++) acc[p][i][j][0] = acc[p][i][j][1] = _mm256_setzero_ps();
		for (int k0 = 0; k0 < K16; k0 += kc) {
			const int k1 = k0 + kc < K16 ? k0 + kc : K16;
			for (int i = 0; i < nb; i += 2) {
				const float *x0 = x + (long)(n0 + i) * K;
				if (nb - i >= 2)
					span_f32_avx2(2, acc[i / 2], x0, x0 + K, r, k0, k1);
				else
					span_f32_avx2(1, acc[i / 2], x0, x0, r, k0, k1);
			}
		}
		for (int i = 0; i < nb; i += 2)
			finish_f32_avx2(nb - i < 2 ? 1 : 2, acc[i / 2], out, x, r, bias, n0 + i, K, OC, o, no);
	}
}
#endif

// rows: out[*, o..o+no) for every n < N, by tiles of 4 rows of x; the next
// group's weight bytes [pf, pf + 64*pf_n) are prefetched across the tiles.
static inline __attribute__((always_inline)) void rows(const int dtype, float *out, const float *x,
                                                      const struct wrows *r, const float *bias, int N,
                                                      int K, int OC, int o, int no, const char *pf,
                                                      int pf_n) {
#if LOWP_ISA == LOWP_ISA_AVX2
	if (dtype == LOWP_F32) {
		rows_f32_avx2(out, x, r, bias, N, K, OC, o, no);
		return;
	}
#endif
	const int tiles = (N + 3) / 4, per = (pf_n + tiles - 1) / tiles;
	int n = 0;
	for (; n + 4 <= N; n += 4, pf += 64L * per, pf_n -= per)
		tile(dtype, 4, out, x, r, bias, n, K, OC, o, no, pf, pf_n < per ? (pf_n > 0 ? pf_n : 0) : per);
	if (pf_n < 0) pf_n = 0;
	switch (N - n) {
	case 3: tile(dtype, 3, out, x, r, bias, n, K, OC, o, no, pf, pf_n); break;
	case 2: tile(dtype, 2, out, x, r, bias, n, K, OC, o, no, pf, pf_n); break;
	case 1: tile(dtype, 1, out, x, r, bias, n, K, OC, o, no, pf, pf_n); break;
	}
}

// LOWP_QFN quantises rows [r_lo, r_hi) of w [*, cols] to int8 blocks: scale
// absmax/127 per block, values rounded to nearest even (as Requantize in Go).
void LOWP_QFN(const float *w, int8_t *q, float *s, int cols, int r_lo, int r_hi) {
	const int nb = (cols + LOWP_BLOCK - 1) / LOWP_BLOCK;
	for (int r = r_lo; r < r_hi; r++) {
		for (int b = 0; b < nb; b++) {
			const int lo = b * LOWP_BLOCK, hi = lo + LOWP_BLOCK < cols ? lo + LOWP_BLOCK : cols;
			const float *x = w + (long)r * cols;
			float amax = 0;
			for (int i = lo; i < hi; i++) {
				const float a = __builtin_fabsf(x[i]);
				amax = a > amax ? a : amax;
			}
			const float d = amax / 127;
			const float inv = d > 0 ? 1 / d : 0;
			s[(long)r * nb + b] = d;
			for (int i = lo; i < hi; i++) q[(long)r * cols + i] = (int8_t)__builtin_rintf(x[i] * inv);
		}
	}
}

// group_src is where the weights of output rows [o, o+4) start; *lines is their size in cache lines.
static inline const char *group_src(int dtype, const float *wf, const uint16_t *wb, const int8_t *wq,
                                    int K, int o, int *lines) {
	switch (dtype) {
	case LOWP_F32: *lines = (int)((16L * K + 63) / 64); return (const char *)(wf + (long)o * K);
	case LOWP_BF16: *lines = (int)((8L * K + 63) / 64); return (const char *)(wb + (long)o * K);
	}
	*lines = (int)((4L * K + 63) / 64);
	return (const char *)(wq + (long)o * K);
}

void LOWP_FN(int dtype, float *out, const float *x, const float *wf, const uint16_t *wb,
             const int8_t *wq, const float *s, const float *bias, int N, int K, int OC, int o_lo,
             int o_hi, float *buf) {
	const int nb = (K + LOWP_BLOCK - 1) / LOWP_BLOCK;
	// Up to one tile of x rows, the weights are read (reduced ones widened in
	// registers) as they are used; more rows share a copy of the 4 rows in
	// buf, in L1 (fp32 rows too: reading them in place for every tile of x
	// rows loses them from L1 when K is large).
#if LOWP_ISA == LOWP_ISA_AVX2
	const int direct = N <= 4 || dtype == LOWP_F32; // rows_f32_avx2 keeps a span of the rows in L1
#else
	const int direct = N <= 4;
#endif
	for (int o = o_lo; o < o_hi; o += 4) {
		const int no = o_hi - o < 4 ? o_hi - o : 4;
		struct wrows r;
		for (int j = 0; j < 4; j++) {
			// rows past the end repeat the group's first row; their sums are dropped
			const long row = o + (j < no ? j : 0);
			if (!direct) {
				if (j < no) dequant(dtype, buf + j * K, wf, wb, wq, s, K, (int)row);
				r.f[j] = buf + (j < no ? j : 0) * K;
			} else if (dtype == LOWP_F32) {
				r.f[j] = wf + row * K;
			} else if (dtype == LOWP_BF16) {
				r.h[j] = wb + row * K;
			} else {
				r.q[j] = wq + row * K;
				r.s[j] = s + row * nb;
			}
		}
		int lines = 0;
		const char *pf = NULL;
		if (o + 4 < o_hi) {
			pf = group_src(dtype, wf, wb, wq, K, o + 4, &lines);
			const int left = (o_hi - o - 4) < 4 ? o_hi - o - 4 : 4;
			lines = lines * left / 4;
		}
		if (!direct || dtype == LOWP_F32)
			rows(LOWP_F32, out, x, &r, bias, N, K, OC, o, no, pf, lines);
		else if (dtype == LOWP_BF16)
			rows(LOWP_BF16, out, x, &r, bias, N, K, OC, o, no, pf, lines);
		else
			rows(LOWP_Q8, out, x, &r, bias, N, K, OC, o, no, pf, lines);
	}
}
