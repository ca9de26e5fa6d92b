// The logprob_twopass variant, waiting for a GPU proof (docs/gpu.md): the
// log-softmax forward as it was before logprob_forward
// (gpu/cuda/kernels/logprob.cuh), which reads each row of logits once. The
// same arguments and grid; included after kernels.cu. On the emulator it is
// the build logprob_forward/twopass (dev/cuda/logprob.edits); on a GPU
// dev/cuda/logprob_forward.cu times the two.
#pragma once

// logprob_forward_twopass reads the row twice: the max, then se and sez.
__global__ void logprob_forward_twopass(float* logp, float* entropy, float* lse, const float* logits,
                                        const int* targets, i64 N, i64 V) {
    i64 n = blockIdx.x;
    const float* z = logits + n * V;
    float m = -INFINITY;
    for (i64 j = threadIdx.x; j < V; j += BLOCK) m = fmaxf(m, z[j]);
    m = block_max(m);
    double se = 0.0, sez = 0.0;
    for (i64 j = threadIdx.x; j < V; j += BLOCK) {
        float d = z[j] - m;
        double e = (double)expf(d);
        se += e;
        sez += e * (double)d;
    }
    se = block_sumd(se);
    sez = block_sumd(sez);
    if (threadIdx.x == 0) {
        double l = log(se);
        float L = m + (float)l;
        lse[n] = L;
        entropy[n] = (float)(l - sez / se);
        int t = targets[n];
        logp[n] = t >= 0 ? z[t] - L : 0.0f;
    }
}
