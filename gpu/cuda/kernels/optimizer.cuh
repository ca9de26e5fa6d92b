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

// adamw: torch.optim.AdamW; bc1, bc2 are the bias corrections 1-beta^step.
__global__ void adamw(float* params, const float* grads, float* m, float* v, i64 n, float lr, float beta1,
                      float beta2, float eps, float wd, float bc1, float bc2) {
    GRID_STRIDE(i, n) {
        float g = grads[i];
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi;
        v[i] = vi;
        float p = params[i] * (1.0f - lr * wd);
        params[i] = p - lr * (mi / bc1) / (sqrtf(vi / bc2) + eps);
    }
}
