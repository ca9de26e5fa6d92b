// Kernels: the warp-level bfloat16 tensor-core product, mma.sync m16n8k16
// with bf16 operands and fp32 accumulators (sm_80 and later), for the
// kernels that run their products on the tensor cores (flashattn.cuh's
// FlashMMA kernels). On the emulator the product is rl_mma_m16n8k16_bf16
// (emu.h). The check of the fragment layouts is checkMMAFragments
// (mma_check.go): on a GPU it compares the hardware's product with the
// layouts written out in Go, on the emulator the emulation's.
// Included by flashattn.cuh (inside kernels.cu's extern "C" block).
#pragma once

// Fragment layouts of mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32,
// D[16x8] = A[16x16] B[16x8] + C[16x8], after the PTX ISA, section
// "Matrix Fragments for mma.m16n8k16 with floating point type" (figures
// "MMA .m16n8k16 fragment layout for matrix A / B / C with .bf16 / .f32
// type"). With g = lane >> 2 (groupID) and t = lane & 3
// (threadID_in_group), each lane holds
//   A: a[0] = A[g][2t..2t+1],   a[1] = A[g+8][2t..2t+1],
//      a[2] = A[g][2t+8..2t+9], a[3] = A[g+8][2t+8..2t+9]
//   B: b[0] = B[2t..2t+1][g],   b[1] = B[2t+8..2t+9][g]
//   C, D: c[0], c[1] = C[g][2t], C[g][2t+1]; c[2], c[3] = C[g+8][2t], C[g+8][2t+1]
// where a register's low 16 bits hold the element of the lower column
// (A) or row (B). The same layouts appear in public kernels, e.g.
// microsoft/MMA-Sim tests/nv/cuda/mma_sm80.cu
// (mma_m16n8k16_row_col_f32_bf16_bf16_f32_kernel).
//
// So a row-major A tile in shared memory gives its fragment with four
// 32-bit loads (two adjacent bf16 each), and so does B when it is stored
// as B^T [n][k] (e.g. K [key][dim] for Q K^T); the accumulator of S = Q K^T
// is, pairwise, the A fragment of P for P V (flashattn.cuh).

extern "C++" {

// mma_bf16_16816: d += A B on the tensor cores, fragments as above; every
// lane of the warp must call it together (mma.sync.aligned).
__device__ void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
#ifdef __CUDACC__
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    rl_mma_m16n8k16_bf16(d, a, b);
#endif
}

// bf16x2 packs two floats, rounded to bfloat16 (nearest, ties to even, as
// bf16.cuh), into one register: lo in the low 16 bits.
__device__ unsigned bf16x2(float lo, float hi) {
    return (unsigned)bf16_bits(lo) | ((unsigned)bf16_bits(hi) << 16);
}

// ld_b32 reads two adjacent bf16 (4-byte aligned) as one register.
__device__ unsigned ld_b32(const unsigned short* p) {
#ifdef __CUDACC__
    return *reinterpret_cast<const unsigned*>(p);
#else
    if ((uintptr_t)p % 4 != 0) __builtin_trap();  // a GPU faults on a misaligned access
    unsigned r;
    memcpy(&r, p, 4);
    return r;
#endif
}

// st_b32 writes one register as two adjacent bf16 (4-byte aligned).
__device__ void st_b32(unsigned short* p, unsigned v) {
#ifdef __CUDACC__
    *reinterpret_cast<unsigned*>(p) = v;
#else
    if ((uintptr_t)p % 4 != 0) __builtin_trap();
    memcpy(p, &v, 4);
#endif
}

// ldsm_x4: ldmatrix.sync.aligned.m8n8.x4.shared.b16 (no .trans): four 8 x 8
// matrices side by side, rows 0..7 and columns 8m..8m+7 (m = 0..3) of a
// row-major tile at p, X[r][c] = p[r * ld + c] (rows 16-byte aligned: p and
// ld a multiple of 8 bf16). Lane l gives the address of row l % 8 of
// matrix l / 8; lane (g, t) receives in r[m] row g, columns 8m + 2t and
// 8m + 2t + 1 (the lower column in the low half). With X = B^T [n][k] (e.g.
// K [key][dim] for Q K^T) that is the B fragment above: r[0], r[1] are b[0],
// b[1] of k 0..15, r[2], r[3] of k 16..31, for the 8 columns n of X's rows.
// Every lane must call it together; on the emulator each lane reads its
// elements itself.
__device__ void ldsm_x4(unsigned (&r)[4], const unsigned short* p, int ld) {
    int lane = threadIdx.x & 31;
#ifdef __CUDACC__
    unsigned a = (unsigned)__cvta_generic_to_shared(p + (lane & 7) * ld + 8 * (lane >> 3));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
    if ((uintptr_t)(p + (lane & 7) * ld + 8 * (lane >> 3)) % 16 != 0) __builtin_trap();  // a GPU faults
    int g = lane >> 2, t = lane & 3;
    for (int m = 0; m < 4; m++) {
        const unsigned short* e = p + g * ld + 8 * m + 2 * t;
        r[m] = (unsigned)e[0] | ((unsigned)e[1] << 16);
    }
#endif
}

// ldsm_x4_t: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 (sm_75 and
// later): the B fragments (above) of two 8-column tiles of B [16 x 16]
// stored row-major at p, B[k][n] = p[k * ld + n] (rows 16-byte aligned: p
// and ld a multiple of 8 bf16), i.e. B^T's rows read as columns: r[0],
// r[1] are b[0], b[1] of columns 0..7, r[2], r[3] of columns 8..15. Lane
// l gives the address of row l % 16, columns 8(l / 16)..+7 (matrix l / 8);
// with .trans lane (g, t) receives, of each 8 x 8 matrix, rows 2t and 2t+1
// of column g, the lower row in the low half. Every lane must call it
// together; on the emulator each lane reads its elements itself.
__device__ void ldsm_x4_t(unsigned (&r)[4], const unsigned short* p, int ld) {
    int lane = threadIdx.x & 31;
#ifdef __CUDACC__
    unsigned a = (unsigned)__cvta_generic_to_shared(p + (lane & 15) * ld + 8 * (lane >> 4));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
#else
    if ((uintptr_t)(p + (lane & 15) * ld + 8 * (lane >> 4)) % 16 != 0) __builtin_trap();  // a GPU faults
    int g = lane >> 2, t = lane & 3;
    for (int m = 0; m < 4; m++) {
        const unsigned short* e = p + (8 * (m & 1) + 2 * t) * ld + 8 * (m >> 1) + g;
        r[m] = (unsigned)e[0] | ((unsigned)e[ld] << 16);
    }
#endif
}

}  // extern "C++"

// mma_bf16_probe: each warp of each block runs one product on registers given
// per lane: problem p = blockIdx.x * (BLOCK/32) + warp (of count) reads
// a[p][lane][0..3], b[p][lane][0..1], c[p][lane][0..3] and writes
// d[p][lane][0..3]. It tests the layouts, not a kernel: the caller lays
// out the registers from row-major matrices (mma_check.go).
__global__ void mma_bf16_probe(float* d, const unsigned* a, const unsigned* b, const float* c, i64 count) {
    i64 p = (i64)blockIdx.x * (BLOCK / 32) + (threadIdx.x >> 5);
    if (p >= count) return;  // the whole warp
    i64 lane = threadIdx.x & 31;
    unsigned ar[4], br[2];
    float dr[4];
    for (int i = 0; i < 4; i++) ar[i] = a[(p * 32 + lane) * 4 + i], dr[i] = c[(p * 32 + lane) * 4 + i];
    for (int i = 0; i < 2; i++) br[i] = b[(p * 32 + lane) * 2 + i];
    mma_bf16_16816(dr, ar, br);
    for (int i = 0; i < 4; i++) d[(p * 32 + lane) * 4 + i] = dr[i];
}
