// The bfloat16 dot-product kernel (AVX-512 BF16, VDPBF16PS): activations
// rounded to bfloat16 and multiplied with bfloat16 weights in pairs, fp32
// accumulation. Twice the multiply rate of fp32 FMA and half its weight
// bytes. The weights are packed by lowp_bf16_pack (see lowp.h).
#include "lowp.h"

// lowp_bf16_pack is plain C (it runs before any kernel choice).
void lowp_bf16_pack(const uint16_t *bf, uint16_t *pw, int OC, int K, int ob_lo, int ob_hi) {
	const int K2 = (K + 1) / 2;
	for (int ob = ob_lo; ob < ob_hi; ob++) {
		for (int kp = 0; kp < K2; kp++) {
			uint16_t *dst = pw + ((long)ob * K2 + kp) * 32;
			for (int j = 0; j < 16; j++) {
				const int o = ob * 16 + j;
				for (int t = 0; t < 2; t++) {
					const int k = 2 * kp + t;
					dst[2 * j + t] = (o < OC && k < K) ? bf[(long)o * K + k] : 0;
				}
			}
		}
	}
}

#if defined(__x86_64__)
int lowp_bf16dot_supported(void) {
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	       __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
	       __builtin_cpu_supports("avx512bf16");
}

#pragma GCC optimize("O3")
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")
#include <immintrin.h>

static inline uint16_t to_bf16(float x) {
	uint32_t u;
	__builtin_memcpy(&u, &x, 4);
	if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)(u >> 16) | 0x40;
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

void lowp_bf16_pairs(const float *x, uint32_t *xb, int N, int K) {
	const int K2 = (K + 1) / 2;
	for (int n = 0; n < N; n++) {
		const float *xr = x + (long)n * K;
		uint16_t *dst = (uint16_t *)(xb + (long)n * K2);
		int k = 0;
		for (; k + 32 <= K; k += 32) {
			const __m512 lo = _mm512_loadu_ps(xr + k), hi = _mm512_loadu_ps(xr + k + 16);
			const __m512bh v = _mm512_cvtne2ps_pbh(hi, lo);
			_mm512_storeu_si512((void *)(dst + k), (__m512i)v);
		}
		for (; k < K; k++) dst[k] = to_bf16(xr[k]);
		if (K & 1) dst[K] = 0;
	}
}

// kern: out rows n0..n0+RN, output blocks ob..ob+RO (16 outputs each).
static inline __attribute__((always_inline)) void kern(const int RN, const int RO, float *out,
                                                      const uint32_t *xb, const uint16_t *pw,
                                                      const float *bias, int n0, int K2, int OC,
                                                      int ob) {
	__m512 acc[8][3];
	for (int i = 0; i < RN; i++)
		for (int j = 0; j < RO; j++) acc[i][j] = _mm512_setzero_ps();
	const uint16_t *w0 = pw + (long)ob * K2 * 32;
	const uint32_t *x0 = xb + (long)n0 * K2;
	for (int kp = 0; kp < K2; kp++) {
		__m512bh w[3];
		for (int j = 0; j < RO; j++)
			w[j] = (__m512bh)_mm512_loadu_si512((const void *)(w0 + ((long)j * K2 + kp) * 32));
		for (int i = 0; i < RN; i++) {
			const __m512bh xv = (__m512bh)_mm512_set1_epi32((int)x0[(long)i * K2 + kp]);
			for (int j = 0; j < RO; j++) acc[i][j] = _mm512_dpbf16_ps(acc[i][j], xv, w[j]);
		}
	}
	for (int j = 0; j < RO; j++) {
		const int o = (ob + j) * 16;
		const int left = OC - o;
		const __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
		const __m512 b = bias ? _mm512_maskz_loadu_ps(m, bias + o) : _mm512_setzero_ps();
		for (int i = 0; i < RN; i++)
			_mm512_mask_storeu_ps(out + (long)(n0 + i) * OC + o, m, _mm512_add_ps(acc[i][j], b));
	}
}

#define KERN_RO(RN)                                                                       \
	switch (ro) {                                                                     \
	case 3: kern(RN, 3, out, xb, pw, bias, n, K2, OC, ob); break;                    \
	case 2: kern(RN, 2, out, xb, pw, bias, n, K2, OC, ob); break;                    \
	default: kern(RN, 1, out, xb, pw, bias, n, K2, OC, ob); break;                   \
	}

void lowp_bf16dot_matmul(float *out, const uint32_t *xb, const uint16_t *pw, const float *bias,
                         int N, int K, int OC, int ob_lo, int ob_hi) {
	const int K2 = (K + 1) / 2;
	for (int ob = ob_lo; ob < ob_hi; ob += 3) {
		const int ro = ob_hi - ob < 3 ? ob_hi - ob : 3;
		for (int n = 0; n < N; n += 8) {
			switch (N - n < 8 ? N - n : 8) {
			case 8: KERN_RO(8); break;
			case 7: KERN_RO(7); break;
			case 6: KERN_RO(6); break;
			case 5: KERN_RO(5); break;
			case 4: KERN_RO(4); break;
			case 3: KERN_RO(3); break;
			case 2: KERN_RO(2); break;
			default: KERN_RO(1); break;
			}
		}
	}
}

#else
int lowp_bf16dot_supported(void) { return 0; }
// Never called: lowp_bf16dot_supported is 0 (lowp.go checks it).
void lowp_bf16_pairs(const float *x, uint32_t *xb, int N, int K) {
	(void)x, (void)xb, (void)N, (void)K;
	__builtin_trap();
}
void lowp_bf16dot_matmul(float *out, const uint32_t *xb, const uint16_t *pw, const float *bias,
                         int N, int K, int OC, int ob_lo, int ob_hi) {
	(void)out, (void)xb, (void)pw, (void)bias, (void)N, (void)K, (void)OC, (void)ob_lo, (void)ob_hi;
	__builtin_trap();
}
#endif
