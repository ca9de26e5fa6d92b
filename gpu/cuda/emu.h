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

template <class T>
T atomicAdd(T* p, T v) {
    return std::atomic_ref<T>(*p).fetch_add(v);
}

static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }

static inline unsigned int __float_as_uint(float x) {
    unsigned int u;
    memcpy(&u, &x, 4);
    return u;
}
