// Kernels: log-softmax of the lm_head: log-probs, entropy and their gradient (logprob.go).
// CPU reference: gpu/cpu; the checks beside the Go ops (logprob_check.go) compare them.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// ---------------------------------------------------------------------------
// log-softmax: one block per row n of logits [N,V]; sums in double as the CPU does.

__global__ void logprob_forward(float* logp, float* entropy, float* lse, const float* logits, const int* targets,
                                i64 N, i64 V) {
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

// dlogits = dlogp*(onehot - p) - dentropy*p*(log p + H); may alias logits
// (each element is read once, then written, by the same thread). Unless
// null, dlogitsb gets dlogits' bfloat16 bits (the LM head's output
// gradient, bf16.go).
__global__ void logprob_backward(float* dlogits, unsigned short* dlogitsb, const float* logits, const float* lse,
                                 const float* entropy, const int* targets, const float* dlogp, const float* dentropy,
                                 i64 N, i64 V) {
    i64 n = blockIdx.x;
    float l = lse[n], H = entropy[n], dh = dentropy[n];
    int t = targets[n];
    float dl = t >= 0 ? dlogp[n] : 0.0f;
    for (i64 j = threadIdx.x; j < V; j += BLOCK) {
        float lp = logits[n * V + j] - l;
        float p = expf(lp);
        float g = -dl * p - dh * p * (lp + H);
        if (j == t) g += dl;
        dlogits[n * V + j] = g;
        if (dlogitsb != nullptr) dlogitsb[n * V + j] = bf16_bits<0>(g);
    }
}
