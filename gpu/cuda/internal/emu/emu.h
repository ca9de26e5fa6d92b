// emu.h lets kernels/kernels.cu compile as C++ for the CPU, for the kernel
// emulator (emu.cc, build tag cudaemu): every thread of a block is a fiber,
// __syncthreads and warp shuffles are barriers, blocks run one after
// another. It executes the kernels' own code, so their indexing,
// reductions and synchronisation are tested on a machine without a GPU.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <atomic>
#include <cmath>

struct rl_dim3 {
    unsigned int x, y, z;
};
extern thread_local rl_dim3 threadIdx, blockIdx;
extern rl_dim3 blockDim, gridDim;

#define __global__
#define __device__ static
#define __shared__ static

void __syncthreads();
void rl_warp_sync();

// __shfl_xor_sync: every lane of the warp publishes its value, then reads
// its partner's; the mask is always full in kernels.cu.
template <class T>
T __shfl_xor_sync(unsigned int, T v, int laneMask) {
    static T buf[1024];
    unsigned int t = threadIdx.x;
    buf[t] = v;
    rl_warp_sync();
    T r = buf[(t & ~31u) | ((t & 31u) ^ (unsigned int)laneMask)];
    rl_warp_sync();
    return r;
}

// __shfl_up_sync: lane l reads lane l - delta's value, its own below delta.
template <class T>
T __shfl_up_sync(unsigned int, T v, unsigned int delta) {
    static T buf[1024];
    unsigned int t = threadIdx.x;
    buf[t] = v;
    rl_warp_sync();
    T r = (t & 31u) >= delta ? buf[t - delta] : v;
    rl_warp_sync();
    return r;
}

template <class T>
T atomicAdd(T* p, T v) {
    return std::atomic_ref<T>(*p).fetch_add(v);
}

static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

// CUDA's rounding intrinsics: each one IEEE operation, never contracted
// (the emulator is built without FMA instructions; fmaf rounds once).
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fsub_rn(float a, float b) { return a - b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __fmaf_rn(float a, float b, float c) { return fmaf(a, b, c); }

static inline unsigned int __float_as_uint(float x) {
    unsigned int u;
    memcpy(&u, &x, 4);
    return u;
}

// rl_mma_m16n8k16_bf16 emulates mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
// (kernels/mma.cuh, which cites the PTX ISA's fragment layouts): d += A B for
// the warp's A [16x16] and B [16x8] in bfloat16. Every lane publishes its
// fragments, the warp meets at a barrier, each lane computes its own four
// accumulators from the published ones, and the warp meets again before
// the buffers can be written anew. A lane's accumulator C[row][col] gets
// the 16 products A[row][k] B[k][col] (exact in fp32: 8-bit significands)
// added in fp32 in order of k. The tensor cores sum with their own
// internal order and alignment, so a GPU may differ in the last bits of a
// sum; the layouts, which decide whether the result is right at all, are
// the PTX ISA's:
//   A[r][k] is in lane (r%8)*4 + (k%8)/2, register (r/8) + 2*(k/8), half k%2
//   B[k][n] is in lane n*4 + (k%8)/2, register k/8, half k%2
//   C[r][n] is in lane (r%8)*4 + n/2, register 2*(r/8) + n%2
static inline float rl_bf16_float(unsigned int h) {
    unsigned int u = (h & 0xffffu) << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

inline void rl_mma_m16n8k16_bf16(float (&d)[4], const unsigned int (&a)[4], const unsigned int (&b)[2]) {
    static unsigned int as[1024][4], bs[1024][2];
    unsigned int t = threadIdx.x, w = t & ~31u, lane = t & 31u;
    for (int i = 0; i < 4; i++) as[t][i] = a[i];
    for (int i = 0; i < 2; i++) bs[t][i] = b[i];
    rl_warp_sync();
    auto A = [&](unsigned int r, unsigned int k) {
        return rl_bf16_float(as[w + (r % 8) * 4 + (k % 8) / 2][r / 8 + 2 * (k / 8)] >> (16 * (k % 2)));
    };
    auto B = [&](unsigned int k, unsigned int n) {
        return rl_bf16_float(bs[w + n * 4 + (k % 8) / 2][k / 8] >> (16 * (k % 2)));
    };
    for (unsigned int i = 0; i < 4; i++) {
        unsigned int r = lane / 4 + 8 * (i / 2), n = 2 * (lane % 4) + i % 2;
        float acc = d[i];
        for (unsigned int k = 0; k < 16; k++) acc += A(r, k) * B(k, n);
        d[i] = acc;
    }
    rl_warp_sync();
}
