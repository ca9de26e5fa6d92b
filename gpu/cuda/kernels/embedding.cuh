// Kernels: token embedding gather / scatter-add, and row gather / scatter (embedding.go).
// CPU reference: gpu/cpu; the checks beside the Go ops (embedding_check.go) compare them.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// ---------------------------------------------------------------------------
// embedding: out [N,C], tokens [N], wte [V,C]

__global__ void embedding_forward(float* out, const int* tokens, const float* wte, i64 N, i64 C) {
    GRID_STRIDE(i, N * C) {
        i64 n = i / C, c = i % C;
        out[i] = wte[(i64)tokens[n] * C + c];
    }
}

// dwte[tokens[n],c] += dout[n,c]; repeated tokens add up through atomics.
__global__ void embedding_backward(float* dwte, const float* dout, const int* tokens, i64 N, i64 C) {
    GRID_STRIDE(i, N * C) {
        i64 n = i / C, c = i % C;
        atomicAdd(&dwte[(i64)tokens[n] * C + c], dout[i]);
    }
}

// ---------------------------------------------------------------------------
// rows of a matrix: the generator's KV-cache writes and selected rows, the packed rows
// of a ScoredOnly batch.

// gather_rows: out[m,:] = inp[rows[m],:], out [M,C].
__global__ void gather_rows(float* out, const float* inp, const int* rows, i64 M, i64 C) {
    GRID_STRIDE(i, M * C) out[i] = inp[(i64)rows[i / C] * C + i % C];
}

// scatter_rows: out[rows[m],:] = inp[m,:], inp [M,C]; rows distinct.
__global__ void scatter_rows(float* out, const float* inp, const int* rows, i64 M, i64 C) {
    GRID_STRIDE(i, M * C) out[(i64)rows[i / C] * C + i % C] = inp[i];
}
