// Reduced-precision weight kernels for generation: fp32 activations times
// bfloat16 or int8 (blocks of 32 with an fp32 scale) weights, fp32
// accumulation. See lowp.go.
#ifndef RLHOST_LOWP_H
#define RLHOST_LOWP_H

#include <stdint.h>

#define LOWP_BLOCK 32 // int8 weights per fp32 scale

enum { LOWP_BF16 = 1, LOWP_Q8 = 2 };
// kernels by instruction set (macros: lowp_kern.h tests them in #if)
#define LOWP_ISA_GENERIC 0
#define LOWP_ISA_AVX2 1
#define LOWP_ISA_AVX512 2

// lowp_matmul computes out[n*OC+o] = sum_k x[n*K+k] * W[o,k] (+ bias[o]) for
// output rows o in [o_lo, o_hi), every n < N. W is [OC,K]: bf16 (wb) or int8
// (wq) with scales s [OC, ceil(K/32)]. buf holds 4*K floats of scratch.
typedef void lowp_matmul_fn(int dtype, float *out, const float *x, const uint16_t *wb,
                            const int8_t *wq, const float *s, const float *bias, int N,
                            int K, int OC, int o_lo, int o_hi, float *buf);

lowp_matmul_fn lowp_matmul_generic, lowp_matmul_avx2, lowp_matmul_avx512;

// lowp_quant_q8 writes rows [r_lo, r_hi) of w [*, cols] as int8 q with
// scales s [*, ceil(cols/32)].
typedef void lowp_quant_fn(const float *w, int8_t *q, float *s, int cols, int r_lo, int r_hi);
lowp_quant_fn lowp_quant_q8_generic, lowp_quant_q8_avx2, lowp_quant_q8_avx512;
void lowp_quant_q8(int isa, const float *w, int8_t *q, float *s, int cols, int r_lo, int r_hi);

// lowp_best_isa is the widest kernel this CPU runs (LOWP_ISA_*).
int lowp_best_isa(void);
// lowp_matmul runs the kernel of the given ISA.
void lowp_matmul(int isa, int dtype, float *out, const float *x, const uint16_t *wb,
                 const int8_t *wq, const float *s, const float *bias, int N, int K, int OC,
                 int o_lo, int o_hi, float *buf);

#endif
