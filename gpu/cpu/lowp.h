// Reduced-precision weight kernels for generation: fp32 activations times
// bfloat16 or int8 (blocks of 32 with an fp32 scale) weights, fp32
// accumulation. See lowp.go.
#ifndef RLHOST_LOWP_H
#define RLHOST_LOWP_H

#include <stdint.h>

#define LOWP_BLOCK 32 // int8 weights per fp32 scale

enum { LOWP_BF16 = 1, LOWP_Q8 = 2, LOWP_F32 = 3 };
// kernels by instruction set (macros: lowp_kern.h tests them in #if)
#define LOWP_ISA_GENERIC 0
#define LOWP_ISA_AVX2 1
#define LOWP_ISA_AVX512 2

// lowp_matmul computes out[n*OC+o] = sum_k x[n*K+k] * W[o,k] (+ bias[o]) for
// output rows o in [o_lo, o_hi), every n < N. W is [OC,K]: fp32 (wf, read in
// place), bf16 (wb) or int8 (wq) with scales s [OC, ceil(K/32)]. buf holds
// 4*K floats of scratch.
typedef void lowp_matmul_fn(int dtype, float *out, const float *x, const float *wf,
                            const uint16_t *wb, const int8_t *wq, const float *s,
                            const float *bias, int N, int K, int OC, int o_lo, int o_hi,
                            float *buf);

lowp_matmul_fn lowp_matmul_generic, lowp_matmul_avx2, lowp_matmul_avx512;

// lowp_quant_q8 writes rows [r_lo, r_hi) of w [*, cols] as int8 q with
// scales s [*, ceil(cols/32)].
typedef void lowp_quant_fn(const float *w, int8_t *q, float *s, int cols, int r_lo, int r_hi);
lowp_quant_fn lowp_quant_q8_generic, lowp_quant_q8_avx2, lowp_quant_q8_avx512;
void lowp_quant_q8(int isa, const float *w, int8_t *q, float *s, int cols, int r_lo, int r_hi);

// lowp_to_bf16 rounds x [n] to bfloat16 (nearest even; NaN stays a quiet NaN).
void lowp_to_bf16(const float *x, uint16_t *out, long n);

// lowp_best_isa is the widest kernel this CPU runs (LOWP_ISA_*).
int lowp_best_isa(void);
// lowp_matmul runs the kernel of the given ISA.
void lowp_matmul(int isa, int dtype, float *out, const float *x, const float *wf,
                 const uint16_t *wb, const int8_t *wq, const float *s, const float *bias, int N,
                 int K, int OC, int o_lo, int o_hi, float *buf);

// lowp_matmul_mt is lowp_matmul over all OC output rows, split into nparts
// ranges of whole groups of 4 rows run on the thread pool (pool.h).
void lowp_matmul_mt(int nparts, int isa, int dtype, float *out, const float *x, const float *wf,
                    const uint16_t *wb, const int8_t *wq, const float *s, const float *bias, int N,
                    int K, int OC);

// The bfloat16 dot-product kernel (lowp_bf16dot.c; AVX-512 BF16). Weights
// W [OC,K] are packed in blocks of 16 output rows: pw[((ob*K2 + kp)*16 + j)*2
// + t] = W[16*ob + j, 2*kp + t], K2 = ceil(K/2), zero past OC and K.
// Activations x [N,K] become bfloat16 pairs xb [N,K2] (round to nearest
// even). lowp_bf16dot_matmul writes out[n*OC+o] for the output blocks
// [ob_lo, ob_hi), every n < N.
int lowp_bf16dot_supported(void);
void lowp_bf16_pack(const uint16_t *bf, uint16_t *pw, int OC, int K, int ob_lo, int ob_hi);
void lowp_bf16_pairs(const float *x, uint32_t *xb, int N, int K);
void lowp_bf16dot_matmul(float *out, const uint32_t *xb, const uint16_t *pw, const float *bias,
                         int N, int K, int OC, int ob_lo, int ob_hi);

// The int8 dot-product kernel (lowp_q8dot.c; AVX-512 VNNI). Weights q
// [OC,K] with scales s [OC,NB] (NB = ceil(K/32)) are packed in blocks of 16
// output rows as unsigned bytes q + 128: pw[((ob*KQ + kq)*16 + j)*4 + t] =
// q[16*ob + j, 4*kq + t] + 128, KQ = 8*NB, and ps[(ob*NB + b)*16 + j] =
// s[16*ob + j, b] (zero weights and scales past OC and K). Activations x
// [N,K] become int8 blocks of 32 xq [N, 32*NB] with scales xs [N,NB] and
// offsets xc [N,NB] (lowp_q8_acts). lowp_q8dot_matmul writes out[n*OC+o] for
// the output blocks [ob_lo, ob_hi), every n < N; the _mt form runs all of
// them in nparts ranges on the thread pool.
int lowp_q8dot_supported(void);
void lowp_q8_pack(const int8_t *q, const float *s, uint8_t *pw, float *ps, int OC, int K, int ob_lo,
                  int ob_hi);
void lowp_q8_acts(const float *x, int8_t *xq, float *xs, int32_t *xc, int N, int K);
void lowp_q8dot_matmul(float *out, const int8_t *xq, const float *xs, const int32_t *xc,
                       const uint8_t *pw, const float *ps, const float *bias, int N, int K, int OC,
                       int ob_lo, int ob_hi);
void lowp_q8dot_matmul_mt(int nparts, float *out, const int8_t *xq, const float *xs,
                          const int32_t *xc, const uint8_t *pw, const float *ps, const float *bias,
                          int N, int K, int OC);

#endif
