// Portable build of the reduced-precision kernels (SSE2 on x86-64).
#pragma GCC optimize("O3")
#define LOWP_ISA LOWP_ISA_GENERIC
#define LOWP_FN lowp_matmul_generic
#define LOWP_QFN lowp_quant_q8_generic
#include "lowp_kern.h"
