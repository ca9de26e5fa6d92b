// Shared by every kernel family: the block size, block reductions and the
// grid-stride loop. Included by kernels.cu.
#pragma once

#define BLOCK 256
typedef long long i64;

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

