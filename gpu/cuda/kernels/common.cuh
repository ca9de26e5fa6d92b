// Shared by every kernel family: the block size, block reductions and the
// grid-stride loop. Included by kernels.cu.
#pragma once

#define BLOCK 256
typedef long long i64;

// fa4 is four floats loaded or stored as one 16-byte access (the fused
// attention's tiles, the decode attention's V rows).
struct alignas(16) fa4 {
    float x, y, z, w;
};
__device__ fa4 fa_ld4(const float* p) {
#ifdef __CUDACC__
    return *reinterpret_cast<const fa4*>(p);
#else
    if ((uintptr_t)p % 16 != 0) __builtin_trap();  // a GPU faults on a misaligned vector access
    fa4 r;
    memcpy(&r, p, sizeof r);
    return r;
#endif
}

// block_sum returns the sum of v over the block to every thread.
__device__ float block_sum(float v) {
    __shared__ float part[BLOCK / 32];
    __shared__ float total;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        float w = threadIdx.x < BLOCK / 32 ? part[threadIdx.x] : 0.0f;
        for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffff, w, o);
        if (threadIdx.x == 0) total = w;
    }
    __syncthreads();
    float r = total;
    __syncthreads();
    return r;
}

// block_sumd is block_sum in double.
__device__ double block_sumd(double v) {
    __shared__ double part[BLOCK / 32];
    __shared__ double total;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        double w = threadIdx.x < BLOCK / 32 ? part[threadIdx.x] : 0.0;
        for (int o = 16; o > 0; o >>= 1) w += __shfl_xor_sync(0xffffffff, w, o);
        if (threadIdx.x == 0) total = w;
    }
    __syncthreads();
    double r = total;
    __syncthreads();
    return r;
}

// block_max returns the maximum of v over the block to every thread.
__device__ float block_max(float v) {
    __shared__ float part[BLOCK / 32];
    __shared__ float total;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = v;
    __syncthreads();
    if (threadIdx.x < 32) {
        float w = threadIdx.x < BLOCK / 32 ? part[threadIdx.x] : -INFINITY;
        for (int o = 16; o > 0; o >>= 1) w = fmaxf(w, __shfl_xor_sync(0xffffffff, w, o));
        if (threadIdx.x == 0) total = w;
    }
    __syncthreads();
    float r = total;
    __syncthreads();
    return r;
}

#define GRID_STRIDE(i, n) for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)

// Column sums over N rows (matmul.cuh's bias and rmsnorm.cuh's weight gradients) in two
// passes, so that every SM has work at N = 8192 and C = 128..896 and the
// order of the sums is fixed (no atomics): pass 1 gives each block 32
// columns (a warp's coalesced 128 bytes) of one chunk of COLSUM_ROWS rows,
// the block's 8 warps taking every 8th row, and writes the chunk's sums to
// part [chunks, C]; colsum_finish adds the chunks' sums in order to out.
#define COLSUM_ROWS 256

// colsum_tiles: the 32-column tiles of C columns.
__device__ int colsum_tiles(i64 C) { return (int)((C + 31) / 32); }

// colsum_rows: this thread's column c (tile * 32 + lane, of blockIdx.x's
// tile) and its rows n0, n0 + BLOCK/32, ... below n1 (of blockIdx.x's chunk).
__device__ void colsum_rows(i64 N, i64 C, i64* chunk, i64* c, i64* n0, i64* n1) {
    int tiles = colsum_tiles(C);
    *chunk = blockIdx.x / tiles;
    *c = (i64)(blockIdx.x % tiles) * 32 + (threadIdx.x & 31);
    *n0 = *chunk * COLSUM_ROWS + (threadIdx.x >> 5);
    *n1 = (*chunk + 1) * COLSUM_ROWS < N ? (*chunk + 1) * COLSUM_ROWS : N;
}

// colsum_store: the block's per-thread sums s (column tile*32 + lane, rows
// strided by warp) reduced over the warps into part[chunk, c].
__device__ void colsum_store(float* part, float s, i64 chunk, i64 c, i64 C) {
    __shared__ float sh[BLOCK];
    sh[threadIdx.x] = s;
    __syncthreads();
    if (threadIdx.x < 32 && c < C) {
        float t = 0.0f;
        for (int w = 0; w < BLOCK / 32; w++) t += sh[w * 32 + threadIdx.x];
        part[chunk * C + c] = t;
    }
}
