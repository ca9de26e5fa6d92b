// The harness of dev/cuda's benchmarks: each *.cu times a kernel variant
// waiting for a GPU proof against its default kernel on the same inputs,
// compares their outputs, and prints one line a shape:
//
//   name shape: default X us, variant Y us, variant/default R, max diff D
//
// Build from the repository's root (or the proof bundle's dev-cuda/) with
//   nvcc -O3 -std=c++17 -arch=sm_90 -o /tmp/bench dev/cuda/NAME.cu
// scripts/gpu/proof.sh builds and runs every one (PROOF_DEV). The kernels
// are gpu/cuda/kernels/kernels.cu's and the variant's file, included as
// they are; the product's own checks prove the defaults against the CPU.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstdint>
#include <vector>

#include "../../gpu/cuda/kernels/kernels.cu"

#define CUDA_CHECK(x)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

template <class T>
T* dev_alloc(size_t n) {
    T* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, n * sizeof(T) + 16));
    CUDA_CHECK(cudaMemset(p, 0, n * sizeof(T) + 16));
    return p;
}

template <class T>
T* dev_upload(const std::vector<T>& h) {
    T* p = dev_alloc<T>(h.size());
    CUDA_CHECK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}

template <class T>
std::vector<T> dev_download(const T* p, size_t n) {
    std::vector<T> h(n);
    CUDA_CHECK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

// randn: n normal values times scale, from seed (xorshift64*, Box-Muller).
inline std::vector<float> randn(size_t n, float scale, unsigned seed) {
    uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
    auto u01 = [&] {
        s ^= s >> 12, s ^= s << 25, s ^= s >> 27;
        return ((s * 0x2545F4914F6CDD1Dull) >> 11) * (1.0 / 9007199254740992.0) + 1e-300;
    };
    std::vector<float> v(n);
    for (auto& x : v) x = (float)(scale * sqrt(-2.0 * log(u01())) * cos(6.283185307179586 * u01()));
    return v;
}

// max_diff: the largest |a - b| over the largest |b| (at least 1).
template <class T>
double max_diff(const std::vector<T>& a, const std::vector<T>& b) {
    double scale = 1.0, worst = 0.0;
    for (size_t i = 0; i < a.size(); i++) {
        scale = fmax(scale, fabs((double)b[i]));
        worst = fmax(worst, fabs((double)a[i] - (double)b[i]));
    }
    return worst / scale;
}

// time_us runs f 3 times, then reps times between two CUDA events: the
// microseconds a run.
template <class F>
double time_us(F f, int reps = 50) {
    for (int i = 0; i < 3; i++) f();
    CUDA_CHECK(cudaGetLastError());
    cudaEvent_t a, b;
    CUDA_CHECK(cudaEventCreate(&a));
    CUDA_CHECK(cudaEventCreate(&b));
    CUDA_CHECK(cudaEventRecord(a));
    for (int i = 0; i < reps; i++) f();
    CUDA_CHECK(cudaEventRecord(b));
    CUDA_CHECK(cudaEventSynchronize(b));
    CUDA_CHECK(cudaGetLastError());
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    CUDA_CHECK(cudaEventDestroy(a));
    CUDA_CHECK(cudaEventDestroy(b));
    return 1000.0 * ms / reps;
}

// attention_heads are the attention shapes the benchmarks time: Qwen2.5-0.5B's
// heads (14 query, 2 KV, 64 dimensions) and Llama-3.2-1B's (32, 8, 64).
struct head_shape {
    const char* model;
    int NH, NKV, HD;
};
static const head_shape attention_heads[] = {{"qwen2.5-0.5b", 14, 2, 64}, {"llama3.2-1b", 32, 8, 64}};

// report prints a shape's line; a difference above tol makes the run fail.
inline bool report(const char* name, const char* shape, double def_us, double var_us, double diff, double tol) {
    printf("%s %s: default %.1f us, variant %.1f us, variant/default %.3f, max diff %.2e%s\n", name, shape, def_us, var_us,
           var_us / def_us, diff, diff > tol ? " (OVER TOLERANCE)" : "");
    return diff <= tol;
}
