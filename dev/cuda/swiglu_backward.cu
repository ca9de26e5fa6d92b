// swiglu_recompute, the MLP backward before swiglu_backward_h: h recomputed
// by swiglu_forward, then swiglu_backward, against swiglu_backward_h, the
// default (dgate, dup and h in one pass over gate and up). Both write the
// bfloat16 copies a bf16 training step writes. n = tokens x F of a step.
#include "common.h"

static int grid_for(long long n) { return (int)std::min<long long>((n + BLOCK - 1) / BLOCK, 65535); }

int main() {
    bool ok = true;
    for (long long n : {8LL * 1024 * 4864, 8LL * 1024 * 8960}) {  // Qwen2.5-0.5B's and 1.5B's F, 8 x 1024 tokens
        auto gate = randn(n, 2.0f, 1), up = randn(n, 1.0f, 2), dout = randn(n, 1.0f, 3);
        float *dg = dev_upload(gate), *du = dev_upload(up), *dd = dev_upload(dout);
        float *h1 = dev_alloc<float>(n), *dg1 = dev_alloc<float>(n), *du1 = dev_alloc<float>(n);
        float *h2 = dev_alloc<float>(n), *dg2 = dev_alloc<float>(n), *du2 = dev_alloc<float>(n);
        unsigned short *b1 = dev_alloc<unsigned short>(3 * n), *b2 = dev_alloc<unsigned short>(3 * n);
        int g = grid_for(n);
        auto def = [&] { swiglu_backward_h<<<g, BLOCK>>>(dg1, du1, h1, b1, b1 + n, b1 + 2 * n, dd, dg, du, n); };
        auto var = [&] {
            swiglu_forward<<<g, BLOCK>>>(h2, b2 + 2 * n, dg, du, n);
            swiglu_backward<<<g, BLOCK>>>(dg2, du2, b2, b2 + n, dd, dg, du, n);
        };
        double td = time_us(def), tv = time_us(var);
        double diff = std::max({max_diff(dev_download(h2, n), dev_download(h1, n)), max_diff(dev_download(dg2, n), dev_download(dg1, n)),
                                max_diff(dev_download(du2, n), dev_download(du1, n))});
        char shape[64];
        snprintf(shape, sizeof shape, "n=%lld", n);
        ok &= report("swiglu_recompute", shape, td, tv, diff, 0.0);  // the same expressions: bit for bit
        for (void* p : {(void*)dg, (void*)du, (void*)dd, (void*)h1, (void*)dg1, (void*)du1, (void*)h2, (void*)dg2, (void*)du2,
                        (void*)b1, (void*)b2})
            cudaFree(p);
    }
    return ok ? 0 : 1;
}
