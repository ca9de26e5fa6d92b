// Kernels: the bias of a product and its gradient; the products are cuBLAS (matmul.go).
// CPU reference: gpu/cpu; the checks beside the Go ops (matmul_check.go) compare them.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// ---------------------------------------------------------------------------
// matmul helpers (the products are cuBLAS): out [N,OC] += bias [OC];
// dbias [OC] += column sums of dout [N,OC].

__global__ void add_bias(float* out, const float* bias, i64 N, i64 OC) {
    GRID_STRIDE(i, N * OC) out[i] += bias[i % OC];
}

__global__ void bias_backward(float* dbias, const float* dout, i64 N, i64 OC) {
    GRID_STRIDE(o, OC) {
        float s = 0.0f;
        for (i64 n = 0; n < N; n++) s += dout[n * OC + o];
        dbias[o] += s;
    }
}
