// clip_scale, ClipAdamW as it ran before clip_coef: the squares' sum down to
// the host (a synchronisation), `scale` over the gradients when they clip,
// then adamw; against the default: the sum, clip_coef on the device, and
// adamw scaling each gradient as it reads it. n = the parameters of a
// Qwen2.5-0.5B and of a 1.5B, every step clipping (max norm 1e-3).
#include "common.h"

static int grid_for(long long n) { return (int)std::min<long long>((n + BLOCK - 1) / BLOCK, 65535); }

int main() {
    bool ok = true;
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.999f, eps = 1e-8f, wd = 0.01f, maxNorm = 1e-3f;
    const float bc1 = 1 - b1, bc2 = 1 - b2;  // step 1
    for (long long n : {494032768LL, 1543714304LL}) {
        auto g0 = randn(n, 1.0f, 4);
        float* grads = dev_upload(g0);
        float *p1 = dev_alloc<float>(n), *m1 = dev_alloc<float>(n), *v1 = dev_alloc<float>(n);
        float *p2 = dev_alloc<float>(n), *m2 = dev_alloc<float>(n), *v2 = dev_alloc<float>(n);
        float* g2 = dev_alloc<float>(n);
        double *parts = dev_alloc<double>(1024), *sum = dev_alloc<double>(1);
        float* coef = dev_alloc<float>(1);
        int gs = (int)std::min<long long>(1024, (n + BLOCK - 1) / BLOCK), g = grid_for(n);
        auto def = [&] {
            sum_squares<<<gs, BLOCK>>>(parts, grads, n);
            sum_f64<<<1, BLOCK>>>(sum, parts, gs);
            clip_coef<<<1, BLOCK>>>(coef, sum, maxNorm);
            adamw<<<g, BLOCK>>>(p1, grads, m1, v1, nullptr, coef, n, lr, b1, b2, eps, wd, bc1, bc2);
        };
        auto var = [&] {
            CUDA_CHECK(cudaMemcpyAsync(g2, grads, n * sizeof(float), cudaMemcpyDeviceToDevice));  // scale writes its input
            sum_squares<<<gs, BLOCK>>>(parts, g2, n);
            sum_f64<<<1, BLOCK>>>(sum, parts, gs);
            double s = 0;
            CUDA_CHECK(cudaMemcpy(&s, sum, 8, cudaMemcpyDeviceToHost));
            double c = (double)maxNorm / (sqrt(s) + 1e-6);
            if (c < 1) scale<<<g, BLOCK>>>(g2, (float)c, n);
            adamw<<<g, BLOCK>>>(p2, g2, m2, v2, nullptr, nullptr, n, lr, b1, b2, eps, wd, bc1, bc2);
        };
        // one step from zero state each, compared; then timed (the variant's time includes the copy
        // of the gradients it scales in place, which ClipGradNorm does not make: subtract it)
        def(), var();
        double diff = max_diff(dev_download(p2, n), dev_download(p1, n));
        double tcopy = time_us([&] { CUDA_CHECK(cudaMemcpyAsync(g2, grads, n * sizeof(float), cudaMemcpyDeviceToDevice)); }, 10);
        double td = time_us(def, 10), tv = time_us(var, 10) - tcopy;
        char shape[64];
        snprintf(shape, sizeof shape, "n=%lld", n);
        ok &= report("clip_scale", shape, td, tv, diff, 0.0);  // the same values (gpu/cuda's ClipAdamW check)
        for (void* p : {(void*)grads, (void*)p1, (void*)m1, (void*)v1, (void*)p2, (void*)m2, (void*)v2, (void*)g2, (void*)parts,
                        (void*)sum, (void*)coef})
            cudaFree(p);
    }
    return ok ? 0 : 1;
}
