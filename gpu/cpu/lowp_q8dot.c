// The int8 dot-product kernel (AVX-512 VNNI, VPDPBUSD): activations
// quantised per row in blocks of 32 (int8 with an fp32 scale absmax/127, the
// weights' own format, as llama.cpp's Q8_0 x Q8_0 product does) and
// multiplied with the int8 weights four at a time into int32 sums, one fp32
// scale per block pair. Four times the multiplies of an fp32 FMA per
// instruction and a quarter of its weight bytes. The weights are packed by
// lowp_q8_pack (see lowp.h).
#include <math.h>

#include "lowp.h"
#include "pool.h"

#define Q8_RN 4 // activation rows per tile
#define Q8_RO 3 // output blocks of 16 per tile

// lowp_q8_pack is plain C (it runs before any kernel choice).
void lowp_q8_pack(const int8_t *q, const float *s, uint8_t *pw, float *ps, int OC, int K, int ob_lo,
                  int ob_hi) {
	const int NB = (K + LOWP_BLOCK - 1) / LOWP_BLOCK, KQ = NB * (LOWP_BLOCK / 4);
	for (int ob = ob_lo; ob < ob_hi; ob++) {
		for (int kq = 0; kq < KQ; kq++) {
			uint8_t *dst = pw + ((long)ob * KQ + kq) * 64;
			for (int j = 0; j < 16; j++) {
				const int o = ob * 16 + j;
				for (int t = 0; t < 4; t++) {
					const int k = 4 * kq + t;
					const int v = (o < OC && k < K) ? q[(long)o * K + k] : 0;
					dst[4 * j + t] = (uint8_t)(v + 128);
				}
			}
		}
		for (int b = 0; b < NB; b++)
			for (int j = 0; j < 16; j++) {
				const int o = ob * 16 + j;
				ps[((long)ob * NB + b) * 16 + j] = o < OC ? s[(long)o * NB + b] : 0;
			}
	}
}

#if defined(__x86_64__)
int lowp_q8dot_supported(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
	       __builtin_cpu_supports("avx512vnni");
}

#pragma GCC optimize("O3")
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni")
#include <immintrin.h>

// kern: out rows n0..n0+RN, output blocks ob..ob+RO (16 outputs each). Per
// block of 32: the int32 sums start at the activations' -128 * sum (the
// unsigned weights' offset), take 8 VPDPBUSD (4 products per lane each),
// then one fp32 FMA by the product of the two scales. The order of the
// operations on one output does not depend on RN, RO or the row's place.
static inline __attribute__((always_inline)) void kern(const int RN, const int RO, float *out,
                                                      const int8_t *xq, const float *xs,
                                                      const int32_t *xc, const uint8_t *pw,
                                                      const float *ps, const float *bias, int n0,
                                                      int NB, int OC, int ob) {
	const int KQ = NB * (LOWP_BLOCK / 4), KP = NB * LOWP_BLOCK;
	__m512 acc[Q8_RN][Q8_RO];
	for (int i = 0; i < RN; i++)
		for (int j = 0; j < RO; j++) acc[i][j] = _mm512_setzero_ps();
	const uint8_t *w0 = pw + (long)ob * KQ * 64;
	for (int b = 0; b < NB; b++) {
		__m512i ia[Q8_RN][Q8_RO];
		for (int i = 0; i < RN; i++) {
			const __m512i c = _mm512_set1_epi32(xc[(long)(n0 + i) * NB + b]);
			for (int j = 0; j < RO; j++) ia[i][j] = c;
		}
		for (int kq = b * 8; kq < b * 8 + 8; kq++) {
			__m512i w[Q8_RO];
			for (int j = 0; j < RO; j++)
				w[j] = _mm512_loadu_si512((const void *)(w0 + ((long)j * KQ + kq) * 64));
			for (int i = 0; i < RN; i++) {
				int32_t xv4;
				__builtin_memcpy(&xv4, xq + (long)(n0 + i) * KP + 4 * kq, 4);
				const __m512i xv = _mm512_set1_epi32(xv4);
				for (int j = 0; j < RO; j++) ia[i][j] = _mm512_dpbusd_epi32(ia[i][j], w[j], xv);
			}
		}
		for (int j = 0; j < RO; j++) {
			const __m512 wsc = _mm512_loadu_ps(ps + ((long)(ob + j) * NB + b) * 16);
			for (int i = 0; i < RN; i++) {
				const __m512 sc = _mm512_mul_ps(wsc, _mm512_set1_ps(xs[(long)(n0 + i) * NB + b]));
				acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ia[i][j]), sc, acc[i][j]);
			}
		}
	}
	for (int j = 0; j < RO; j++) {
		const int o = (ob + j) * 16;
		const int left = OC - o;
		const __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
		const __m512 bv = bias ? _mm512_maskz_loadu_ps(m, bias + o) : _mm512_setzero_ps();
		for (int i = 0; i < RN; i++)
			_mm512_mask_storeu_ps(out + (long)(n0 + i) * OC + o, m, _mm512_add_ps(acc[i][j], bv));
	}
}

// lowp_q8_acts quantises the activations x [N,K] per row in blocks of 32:
// xq [N, NB*32] (zero past K), xs [N,NB] the scales absmax/127 and xc [N,NB]
// the blocks' -128 * sum of xq (the weights are stored as unsigned w + 128):
// q = nearest-even(x * (1/d)) in float arithmetic (VCVTPS2DQ in the default
// rounding mode), as Q8Activations in lowp.go. Only called where the kernel
// runs (AVX-512).
void lowp_q8_acts(const float *x, int8_t *xq, float *xs, int32_t *xc, int N, int K) {
	const int NB = (K + LOWP_BLOCK - 1) / LOWP_BLOCK, KP = NB * LOWP_BLOCK;
	const __m512 absmask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
	for (int n = 0; n < N; n++) {
		const float *xr = x + (long)n * K;
		for (int b = 0; b < NB; b++) {
			const int k0 = b * LOWP_BLOCK, len = K - k0 < LOWP_BLOCK ? K - k0 : LOWP_BLOCK;
			const __mmask16 m0 = len >= 16 ? 0xffff : (__mmask16)((1u << len) - 1);
			const __mmask16 m1 = len >= 32 ? 0xffff : len > 16 ? (__mmask16)((1u << (len - 16)) - 1) : 0;
			const __m512 v0 = _mm512_maskz_loadu_ps(m0, xr + k0), v1 = _mm512_maskz_loadu_ps(m1, xr + k0 + 16);
			const float amax = _mm512_reduce_max_ps(
				_mm512_max_ps(_mm512_and_ps(v0, absmask), _mm512_and_ps(v1, absmask)));
			const float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
			const __m512 idv = _mm512_set1_ps(id);
			const __m512i q0 = _mm512_cvtps_epi32(_mm512_mul_ps(v0, idv));
			const __m512i q1 = _mm512_cvtps_epi32(_mm512_mul_ps(v1, idv));
			int8_t *dst = xq + (long)n * KP + k0;
			_mm_storeu_si128((__m128i *)dst, _mm512_cvtsepi32_epi8(q0));
			_mm_storeu_si128((__m128i *)(dst + 16), _mm512_cvtsepi32_epi8(q1));
			xs[(long)n * NB + b] = d;
			xc[(long)n * NB + b] = -128 * _mm512_reduce_add_epi32(_mm512_add_epi32(q0, q1));
		}
	}
}

#define Q8_KERN_RO(RN)                                                                    \
	switch (ro) {                                                                     \
	case 3: kern(RN, 3, out, xq, xs, xc, pw, ps, bias, n, NB, OC, ob); break;        \
	case 2: kern(RN, 2, out, xq, xs, xc, pw, ps, bias, n, NB, OC, ob); break;        \
	default: kern(RN, 1, out, xq, xs, xc, pw, ps, bias, n, NB, OC, ob); break;       \
	}

void lowp_q8dot_matmul(float *out, const int8_t *xq, const float *xs, const int32_t *xc,
                       const uint8_t *pw, const float *ps, const float *bias, int N, int K, int OC,
                       int ob_lo, int ob_hi) {
	const int NB = (K + LOWP_BLOCK - 1) / LOWP_BLOCK;
	for (int ob = ob_lo; ob < ob_hi; ob += Q8_RO) {
		const int ro = ob_hi - ob < Q8_RO ? ob_hi - ob : Q8_RO;
		for (int n = 0; n < N; n += Q8_RN) {
			switch (N - n < Q8_RN ? N - n : Q8_RN) {
			case 4: Q8_KERN_RO(4); break;
			case 3: Q8_KERN_RO(3); break;
			case 2: Q8_KERN_RO(2); break;
			default: Q8_KERN_RO(1); break;
			}
		}
	}
}

#else
// lowp_q8_acts quantises the activations x [N,K] per row in blocks of 32:
// xq [N, NB*32] (zero past K), xs [N,NB] the scales absmax/127 and xc [N,NB]
// the blocks' -128 * sum of xq (the weights are stored as unsigned w + 128):
// q = nearest-even(x * (1/d)) in float arithmetic, as Q8Activations in
// lowp.go.
void lowp_q8_acts(const float *x, int8_t *xq, float *xs, int32_t *xc, int N, int K) {
	const int NB = (K + LOWP_BLOCK - 1) / LOWP_BLOCK, KP = NB * LOWP_BLOCK;
	for (int n = 0; n < N; n++) {
		const float *xr = x + (long)n * K;
		for (int b = 0; b < NB; b++) {
			const int k0 = b * LOWP_BLOCK, len = K - k0 < LOWP_BLOCK ? K - k0 : LOWP_BLOCK;
			float v[LOWP_BLOCK] = {0}, amax = 0;
			for (int i = 0; i < len; i++) v[i] = xr[k0 + i];
			for (int i = 0; i < LOWP_BLOCK; i++) {
				const float a = fabsf(v[i]);
				amax = a > amax ? a : amax;
			}
			const float d = amax / 127.0f, id = d > 0 ? 1.0f / d : 0.0f;
			int8_t *dst = xq + (long)n * KP + k0;
			int sum = 0;
			for (int i = 0; i < LOWP_BLOCK; i++) {
				const int qv = (int)rintf(v[i] * id);
				dst[i] = (int8_t)qv;
				sum += qv;
			}
			xs[(long)n * NB + b] = d;
			xc[(long)n * NB + b] = -128 * sum;
		}
	}
}

int lowp_q8dot_supported(void) { return 0; }
// Never called: lowp_q8dot_supported is 0 (lowp.go checks it).
void lowp_q8dot_matmul(float *out, const int8_t *xq, const float *xs, const int32_t *xc,
                       const uint8_t *pw, const float *ps, const float *bias, int N, int K, int OC,
                       int ob_lo, int ob_hi) {
	(void)out, (void)xq, (void)xs, (void)xc, (void)pw, (void)ps, (void)bias, (void)N, (void)K;
	(void)OC, (void)ob_lo, (void)ob_hi;
	__builtin_trap();
}
#endif

struct q8dot_job {
	float *out;
	const int8_t *xq;
	const float *xs;
	const int32_t *xc;
	const uint8_t *pw;
	const float *ps, *bias;
	int N, K, OC;
};

// q8dot_part runs part p of n of a product: a contiguous range of whole
// tiles of Q8_RO output blocks.
static void q8dot_part(void *ctx, int p, int n) {
	const struct q8dot_job *j = ctx;
	const long tiles = ((j->OC + 15) / 16 + Q8_RO - 1) / Q8_RO;
	const int lo = (int)(Q8_RO * (tiles * p / n));
	int hi = (int)(Q8_RO * (tiles * (p + 1) / n));
	const int obs = (j->OC + 15) / 16;
	if (hi > obs) hi = obs;
	if (lo >= hi) return;
	lowp_q8dot_matmul(j->out, j->xq, j->xs, j->xc, j->pw, j->ps, j->bias, j->N, j->K, j->OC, lo, hi);
}

void lowp_q8dot_matmul_mt(int nparts, float *out, const int8_t *xq, const float *xs,
                          const int32_t *xc, const uint8_t *pw, const float *ps, const float *bias,
                          int N, int K, int OC) {
	struct q8dot_job j = {out, xq, xs, xc, pw, ps, bias, N, K, OC};
	rl_pool_run(q8dot_part, &j, nparts);
}
