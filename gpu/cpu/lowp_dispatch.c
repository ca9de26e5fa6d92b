// Run-time choice of the reduced-precision kernels.
#include "lowp.h"

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

void lowp_matmul(int isa, int dtype, float *out, const float *x, const uint16_t *wb,
                 const int8_t *wq, const float *s, const float *bias, int N, int K, int OC,
                 int o_lo, int o_hi, float *buf) {
	switch (isa) {
	case LOWP_ISA_AVX512:
		lowp_matmul_avx512(dtype, out, x, wb, wq, s, bias, N, K, OC, o_lo, o_hi, buf);
		return;
	case LOWP_ISA_AVX2:
		lowp_matmul_avx2(dtype, out, x, wb, wq, s, bias, N, K, OC, o_lo, o_hi, buf);
		return;
	}
	lowp_matmul_generic(dtype, out, x, wb, wq, s, bias, N, K, OC, o_lo, o_hi, buf);
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
