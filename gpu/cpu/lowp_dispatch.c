// Run-time choice of the reduced-precision kernels.
#include <stdlib.h>
#include <string.h>

#include "lowp.h"
#include "pool.h"

int lowp_best_isa(void) {
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
		return LOWP_ISA_AVX512;
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return LOWP_ISA_AVX2;
#endif
	return LOWP_ISA_GENERIC;
}

void lowp_matmul(int isa, int dtype, float *out, const float *x, const float *wf,
                 const uint16_t *wb, const int8_t *wq, const float *s, const float *bias, int N,
                 int K, int OC, int o_lo, int o_hi, float *buf) {
	switch (isa) {
	case LOWP_ISA_AVX512:
		lowp_matmul_avx512(dtype, out, x, wf, wb, wq, s, bias, N, K, OC, o_lo, o_hi, buf);
		return;
	case LOWP_ISA_AVX2:
		lowp_matmul_avx2(dtype, out, x, wf, wb, wq, s, bias, N, K, OC, o_lo, o_hi, buf);
		return;
	}
	lowp_matmul_generic(dtype, out, x, wf, wb, wq, s, bias, N, K, OC, o_lo, o_hi, buf);
}

void lowp_quant_q8(int isa, const float *w, int8_t *q, float *s, int cols, int r_lo, int r_hi) {
	switch (isa) {
	case LOWP_ISA_AVX512:
		lowp_quant_q8_avx512(w, q, s, cols, r_lo, r_hi);
		return;
	case LOWP_ISA_AVX2:
		lowp_quant_q8_avx2(w, q, s, cols, r_lo, r_hi);
		return;
	}
	lowp_quant_q8_generic(w, q, s, cols, r_lo, r_hi);
}


// scratch is this thread's dequantisation buffer (never freed: the threads
// that run products live as long as the process).
static float *scratch(int n) {
	static __thread float *buf;
	static __thread int cap;
	if (cap < n) {
		free(buf);
		buf = malloc(sizeof(float) * (size_t)n);
		cap = buf ? n : 0;
	}
	return buf;
}

struct lowp_job {
	int isa, dtype, N, K, OC;
	float *out;
	const float *x, *wf, *s, *bias;
	const uint16_t *wb;
	const int8_t *wq;
};

// lowp_part runs part p of n of a product: a contiguous range of whole
// groups of 4 output rows.
static void lowp_part(void *ctx, int p, int n) {
	const struct lowp_job *j = ctx;
	const long groups = (j->OC + 3) / 4;
	const int lo = (int)(4 * (groups * p / n));
	int hi = (int)(4 * (groups * (p + 1) / n));
	if (hi > j->OC) hi = j->OC;
	if (lo >= hi) return;
	float *buf = scratch(4 * j->K);
	if (!buf) abort();
	lowp_matmul(j->isa, j->dtype, j->out, j->x, j->wf, j->wb, j->wq, j->s, j->bias, j->N, j->K, j->OC,
	            lo, hi, buf);
}

void lowp_matmul_mt(int nparts, int isa, int dtype, float *out, const float *x, const float *wf,
                    const uint16_t *wb, const int8_t *wq, const float *s, const float *bias, int N,
                    int K, int OC) {
	struct lowp_job j = {isa, dtype, N, K, OC, out, x, wf, s, bias, wb, wq};
	rl_pool_run(lowp_part, &j, nparts);
}

// lowp_to_bf16 rounds x [n] to bfloat16, nearest even, NaN kept quiet: ToBF16 of lowp.go
// element by element, vectorised for each instruction set (one clone is chosen at load time).
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3"))) void lowp_to_bf16(
	const float *restrict x, uint16_t *restrict out, long n) {
	const uint32_t *u = (const uint32_t *)x;
	for (long i = 0; i < n; i++) {
		const uint32_t v = u[i], r = (v + 0x7fff + (v >> 16 & 1)) >> 16, q = (v >> 16) | 0x40;
		const uint32_t nan = -(uint32_t)((v & 0x7fffffff) > 0x7f800000);
		out[i] = (uint16_t)((r & ~nan) | (q & nan));
	}
}
