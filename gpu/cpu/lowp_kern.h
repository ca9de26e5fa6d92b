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

static inline __attribute__((always_inline)) float hsum(const v16f *pv) {
	// pairwise, so the order is the same on every instruction set
	v16f v = *pv;
	float s = 0;
	for (int w = 8; w >= 1; w /= 2) {
		for (int i = 0; i < w; i++) v[i] += v[i + w];
	}
	s = v[0];
	return s;
}

// dequant writes row o of W as K floats to dst.
static inline void dequant(int dtype, float *dst, const uint16_t *wb, const int8_t *wq,
                           const float *s, int K, int o) {
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

// tile: out[n, o..o+no) for nx x rows starting at n, W rows dequantised in
// buf [4][K]. Accumulation: 16 lanes over k, then a fixed pairwise lane sum,
// then the scalar tail.
static inline __attribute__((always_inline)) void tile(const int nx, const int no, float *out,
                                                      const float *x, const float *buf,
                                                      const float *bias, int n, int K, int OC,
                                                      int o) {
	v16f acc[4][4];
	for (int i = 0; i < nx; i++)
		for (int j = 0; j < no; j++) acc[i][j] = (v16f){0};
	int k = 0;
	for (; k + 16 <= K; k += 16) {
		v16f w[4];
		for (int j = 0; j < no; j++) w[j] = ld(buf + j * K + k);
		for (int i = 0; i < nx; i++) {
			const v16f xv = ld(x + (long)(n + i) * K + k);
			for (int j = 0; j < no; j++) acc[i][j] += xv * w[j];
		}
	}
	for (int i = 0; i < nx; i++) {
		for (int j = 0; j < no; j++) {
			float sum = hsum(&acc[i][j]);
			const float *xr = x + (long)(n + i) * K;
			for (int kk = k; kk < K; kk++) sum += xr[kk] * buf[j * K + kk];
			if (bias) sum += bias[o + j];
			out[(long)(n + i) * OC + o + j] = sum;
		}
	}
}

static void rows(const int no, float *out, const float *x, const float *buf, const float *bias,
                 int N, int K, int OC, int o) {
	int n = 0;
	switch (no) {
	case 4:
		for (; n + 4 <= N; n += 4) tile(4, 4, out, x, buf, bias, n, K, OC, o);
		switch (N - n) {
		case 3: tile(3, 4, out, x, buf, bias, n, K, OC, o); break;
		case 2: tile(2, 4, out, x, buf, bias, n, K, OC, o); break;
		case 1: tile(1, 4, out, x, buf, bias, n, K, OC, o); break;
		}
		break;
	default: // the last 1-3 rows of W: one row at a time
		for (int j = 0; j < no; j++) {
			for (n = 0; n + 4 <= N; n += 4) tile(4, 1, out, x, buf + j * K, bias, n, K, OC, o + j);
			switch (N - n) {
			case 3: tile(3, 1, out, x, buf + j * K, bias, n, K, OC, o + j); break;
			case 2: tile(2, 1, out, x, buf + j * K, bias, n, K, OC, o + j); break;
			case 1: tile(1, 1, out, x, buf + j * K, bias, n, K, OC, o + j); break;
			}
		}
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

void LOWP_FN(int dtype, float *out, const float *x, const uint16_t *wb, const int8_t *wq,
             const float *s, const float *bias, int N, int K, int OC, int o_lo, int o_hi,
             float *buf) {
	for (int o = o_lo; o < o_hi; o += 4) {
		const int no = o_hi - o < 4 ? o_hi - o : 4;
		for (int j = 0; j < no; j++) dequant(dtype, buf + j * K, wb, wq, s, K, o + j);
		rows(no, out, x, buf, bias, N, K, OC, o);
	}
}
