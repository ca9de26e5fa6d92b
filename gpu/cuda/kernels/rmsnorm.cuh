// Kernels: RMSNorm forward and backward, and its fusions with the residual
// add (rmsnorm.go). CPU reference: gpu/cpu; the checks beside the Go ops
// (rmsnorm_check.go) compare them.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// The forwards write, unless outb is null, the bfloat16 bits of out
// (bf16_bits: those f32_to_bf16 makes of it) to outb [N,C]: the shared
// bfloat16 copy of an activation that products read next (bf16.go); the
// backward likewise dinp's to dinpb (a gradient copy: the output gradient
// of the products before the norm).

// ---------------------------------------------------------------------------
// RMSNorm: one block per row n.

__global__ void rmsnorm_forward(float* out, unsigned short* outb, float* rstd, const float* inp, const float* weight,
                                i64 N, i64 C, float eps) {
    i64 n = blockIdx.x;
    const float* x = inp + n * C;
    float ss = 0.0f;
    for (i64 i = threadIdx.x; i < C; i += BLOCK) ss += x[i] * x[i];
    ss = block_sum(ss);
    float r = rsqrtf(ss / (float)C + eps);
    for (i64 i = threadIdx.x; i < C; i += BLOCK) {
        float o = x[i] * r * weight[i];
        out[n * C + i] = o;
        if (outb != nullptr) outb[n * C + i] = bf16_bits(o);
    }
    if (threadIdx.x == 0) rstd[n] = r;
}

// residual_rmsnorm_forward: res = a + b (res may alias a or b), out =
// rmsnorm(res) * weight, rstd [N]; one block per row n, as llm.c's
// fused_residual_forward. Each thread squares the sums it writes and
// re-reads only its own elements of res (from cache), so a and b are read
// once and res is never read back from memory by another pass.
__global__ void residual_rmsnorm_forward(float* res, float* out, unsigned short* outb, float* rstd, const float* a,
                                         const float* b, const float* weight, i64 N, i64 C, float eps) {
    i64 n = blockIdx.x;
    float ss = 0.0f;
    for (i64 i = threadIdx.x; i < C; i += BLOCK) {
        float v = a[n * C + i] + b[n * C + i];
        res[n * C + i] = v;
        ss += v * v;
    }
    ss = block_sum(ss);
    float r = rsqrtf(ss / (float)C + eps);
    for (i64 i = threadIdx.x; i < C; i += BLOCK) {
        float x = res[n * C + i];
        float o = x * r * weight[i];
        out[n * C + i] = o;
        if (outb != nullptr) outb[n * C + i] = bf16_bits(o);
    }
    if (threadIdx.x == 0) rstd[n] = r;
}

// rmsnorm_backward_dinp: dinp = (add 0) or += (add 1) the input gradient for
// the output gradient dout + dout2 (dout2 may be null): per row n, with d =
// dout (+ dout2 unless null), g_i = rstd * (w_i*d_i - x_i * rstd^2 *
// mean_j(w_j*d_j*x_j)); dinp = g (add 0) or dinp += g (add 1: the residual
// stream's gradient); dinpb (unless null) the bfloat16 bits of the dinp
// written.
__global__ void rmsnorm_backward_dinp(float* dinp, unsigned short* dinpb, const float* dout, const float* dout2,
                                      const float* inp, const float* weight, const float* rstd, i64 N, i64 C, i64 add) {
    i64 n = blockIdx.x;
    const float* x = inp + n * C;
    const float* d = dout + n * C;
    const float* d2 = dout2 != nullptr ? dout2 + n * C : nullptr;
    float r = rstd[n];
    float dot = 0.0f;
    for (i64 i = threadIdx.x; i < C; i += BLOCK) dot += weight[i] * (d2 ? d[i] + d2[i] : d[i]) * x[i];
    dot = block_sum(dot);
    float c = r * r * dot / (float)C;
    for (i64 i = threadIdx.x; i < C; i += BLOCK) {
        float g = r * (weight[i] * (d2 ? d[i] + d2[i] : d[i]) - x[i] * c);
        if (add) g += dinp[n * C + i];
        dinp[n * C + i] = g;
        if (dinpb != nullptr) dinpb[n * C + i] = bf16_bits(g);
    }
}

// dweight[c] += sum_n (dout+dout2)[n,c]*inp[n,c]*rstd[n] (dout2 may be null),
// pass 1 of the column sums (matmul.cuh: bias_backward, colsum_finish): grid
// colsum_tiles(C) x chunks of COLSUM_ROWS rows, the chunks' sums to part.
__global__ void rmsnorm_backward_dweight(float* part, const float* dout, const float* dout2, const float* inp,
                                         const float* rstd, i64 N, i64 C) {
    i64 chunk, c, n0, n1;
    colsum_rows(N, C, &chunk, &c, &n0, &n1);
    float s = 0.0f;
    if (c < C)
        for (i64 n = n0; n < n1; n += BLOCK / 32) {
            float d = dout2 ? dout[n * C + c] + dout2[n * C + c] : dout[n * C + c];
            s += d * inp[n * C + c] * rstd[n];
        }
    colsum_store(part, s, chunk, c, C);
}
