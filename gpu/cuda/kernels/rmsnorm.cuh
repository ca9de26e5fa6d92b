// Kernels: RMSNorm forward and backward (rmsnorm.go).
// CPU reference: gpu/cpu; the checks beside the Go ops (rmsnorm_check.go) compare them.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// ---------------------------------------------------------------------------
// RMSNorm: one block per row n.

__global__ void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, i64 N, i64 C, float eps) {
    i64 n = blockIdx.x;
    const float* x = inp + n * C;
    float ss = 0.0f;
    for (i64 i = threadIdx.x; i < C; i += BLOCK) ss += x[i] * x[i];
    ss = block_sum(ss);
    float r = rsqrtf(ss / (float)C + eps);
    for (i64 i = threadIdx.x; i < C; i += BLOCK) out[n * C + i] = x[i] * r * weight[i];
    if (threadIdx.x == 0) rstd[n] = r;
}

// dinp_i = rstd * (w_i*dout_i - x_i * rstd^2 * mean_j(w_j*dout_j*x_j)).
__global__ void rmsnorm_backward_dinp(float* dinp, const float* dout, const float* inp, const float* weight,
                                      const float* rstd, i64 N, i64 C) {
    i64 n = blockIdx.x;
    const float* x = inp + n * C;
    const float* d = dout + n * C;
    float r = rstd[n];
    float dot = 0.0f;
    for (i64 i = threadIdx.x; i < C; i += BLOCK) dot += weight[i] * d[i] * x[i];
    dot = block_sum(dot);
    float c = r * r * dot / (float)C;
    for (i64 i = threadIdx.x; i < C; i += BLOCK) dinp[n * C + i] = r * (weight[i] * d[i] - x[i] * c);
}

// dweight[c] += sum_n dout[n,c]*inp[n,c]*rstd[n]: one thread per channel, rows in order.
__global__ void rmsnorm_backward_dweight(float* dweight, const float* dout, const float* inp, const float* rstd,
                                         i64 N, i64 C) {
    GRID_STRIDE(c, C) {
        float s = 0.0f;
        for (i64 n = 0; n < N; n++) s += dout[n * C + c] * inp[n * C + c] * rstd[n];
        dweight[c] += s;
    }
}
