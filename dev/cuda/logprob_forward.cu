// logprob_twopass (dev/cuda/logprob_twopass.cuh) against logprob_forward,
// the default (one pass over the logits): the log-softmax forward of
// N rows of V logits, at the GRPO step's shapes.
#include "common.h"
#include "logprob_twopass.cuh"

int main() {
    bool ok = true;
    for (int V : {32000, 151936}) {
        for (int N : {64, 2048}) {
            auto z = randn((size_t)N * V, 3.0f, 7);
            std::vector<int> tg(N);
            for (int i = 0; i < N; i++) tg[i] = (i * 7919) % V;
            float* dz = dev_upload(z);
            int* dt = dev_upload(tg);
            float *o1 = dev_alloc<float>(3 * N), *o2 = dev_alloc<float>(3 * N);
            auto def = [&] { logprob_forward<<<N, BLOCK>>>(o1, o1 + N, o1 + 2 * N, dz, dt, N, V); };
            auto var = [&] { logprob_forward_twopass<<<N, BLOCK>>>(o2, o2 + N, o2 + 2 * N, dz, dt, N, V); };
            double td = time_us(def), tv = time_us(var);
            char shape[64];
            snprintf(shape, sizeof shape, "N=%d V=%d", N, V);
            ok &= report("logprob_twopass", shape, td, tv, max_diff(dev_download(o2, 3 * N), dev_download(o1, 3 * N)), 1e-5);
            cudaFree(dz), cudaFree(dt), cudaFree(o1), cudaFree(o2);
        }
    }
    return ok ? 0 : 1;
}
