// AVX-512 build of the reduced-precision kernels.
#if defined(__x86_64__)
#pragma GCC optimize("O3")
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,fma,avx2")
#define LOWP_ISA LOWP_ISA_AVX512
#define LOWP_FN lowp_matmul_avx512
#define LOWP_QFN lowp_quant_q8_avx512
#include "lowp_kern.h"
#else
#include "lowp.h"
void lowp_quant_q8_avx512(const float *w, int8_t *q, float *s, int cols, int r_lo, int r_hi) {
	lowp_quant_q8_generic(w, q, s, cols, r_lo, r_hi);
}
void lowp_matmul_avx512(int dtype, float *out, const float *x, const float *wf, const uint16_t *wb,
                        const int8_t *wq, const float *s, const float *bias, int N, int K, int OC,
                        int o_lo, int o_hi, float *buf) {
	lowp_matmul_generic(dtype, out, x, wf, wb, wq, s, bias, N, K, OC, o_lo, o_hi, buf);
}
#endif
