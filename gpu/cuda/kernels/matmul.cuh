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

// colsum_finish: out[c] += the chunks' sums part[0..chunks-1, c], in order.
__global__ void colsum_finish(float* out, const float* part, i64 chunks, i64 C) {
    GRID_STRIDE(c, C) {
        float s = 0.0f;
        for (i64 k = 0; k < chunks; k++) s += part[k * C + c];
        out[c] += s;
    }
}

// bias_backward, pass 1 of dbias[o] += sum_n dout[n,o]; grid colsum_tiles(OC) x chunks.
__global__ void bias_backward(float* part, const float* dout, i64 N, i64 OC) {
    i64 chunk, c, n0, n1;
    colsum_rows(N, OC, &chunk, &c, &n0, &n1);
    float s = 0.0f;
    if (c < OC)
        for (i64 n = n0; n < n1; n += BLOCK / 32) s += dout[n * OC + c];
    colsum_store(part, s, chunk, c, OC);
}
