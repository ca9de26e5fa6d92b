// Kernels: squared gradient norm, clipping scale, AdamW (optimizer.go).
// CPU reference: gpu/cpu; the checks beside the Go ops (optimizer_check.go) compare them.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// ---------------------------------------------------------------------------
// optimizer

// sum_squares: out[blockIdx.x] = sum of x^2 over the block's grid-stride
// share, in double; the host adds the per-block partials.
__global__ void sum_squares(double* out, const float* x, i64 n) {
    double s = 0.0;
    GRID_STRIDE(i, n) s += (double)x[i] * (double)x[i];
    s = block_sumd(s);
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

// sum_f64: out[0] = sum of the n doubles of parts (one block), so that a
// norm comes down as one value.
__global__ void sum_f64(double* out, const double* parts, i64 n) {
    double s = 0.0;
    for (i64 i = threadIdx.x; i < n; i += blockDim.x) s += parts[i];
    s = block_sumd(s);
    if (threadIdx.x == 0) out[0] = s;
}

__global__ void scale(float* x, float s, i64 n) {
    GRID_STRIDE(i, n) x[i] *= s;
}

// clip_coef: coef[0] = the factor gpu.ClipGradNorm scales the gradients by
// when their squares sum to sum[0]: maxNorm / (sqrt(sum) + 1e-6) in
// double, rounded to float, where that is below 1; 1 otherwise (the same
// operations in the same order as the Go code, so the same float).
__global__ void clip_coef(float* coef, const double* sum, float maxNorm) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        double norm = sqrt(sum[0]);
        double c = (double)maxNorm / (norm + 1e-6);
        coef[0] = c < 1.0 ? (float)c : 1.0f;
    }
}

// adamw: torch.optim.AdamW; bc1, bc2 are the bias corrections
// 1-beta^step. Unless null, pb [n] gets the bfloat16 bits of the updated
// parameters (bf16_bits, so the bits f32_to_bf16 makes of them): the
// resident copy of the tensor they lie in, kept current (bf16.go). Unless
// null, coef[0] (clip_coef) scales each gradient as it is read, as `scale`
// would have scaled it in place (grads itself is left as it is).
__global__ void adamw(float* params, const float* grads, float* m, float* v, unsigned short* pb, const float* coef, i64 n,
                      float lr, float beta1, float beta2, float eps, float wd, float bc1, float bc2) {
    bool clip = coef != nullptr;
    float s = clip ? coef[0] : 1.0f;
    GRID_STRIDE(i, n) {
        float g = grads[i];
        if (clip) g *= s;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p0 = params[i];
        float p = p0 * (1.0f - lr * wd);
        p = p - lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
        params[i] = p;
        if (pb != nullptr) pb[i] = bf16_bits(p);
    }
}
