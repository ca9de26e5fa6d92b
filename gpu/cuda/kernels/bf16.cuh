// Kernels: mixed precision. The bfloat16 operands of the tensor-core
// products (cublasGemmEx with CUDA_R_16BF inputs, fp32 accumulation) are
// made here from fp32 tensors: the resident bf16 copies of the weights
// (refreshed after every write to them, e.g. an AdamW step) and each
// product's activations. CPU reference: bf16Round in bf16.go; the checks
// are in bf16_check.go.
// Included by kernels.cu inside its extern "C" block.
#pragma once

// bf16_bits rounds x to bfloat16, to nearest with ties to even, as
// __float2bfloat16_rn and PyTorch's x.to(torch.bfloat16) do: finite values
// beyond the largest bfloat16 become infinities, NaNs stay NaNs (quiet,
// sign kept).
__device__ unsigned short bf16_bits(float x) {
    unsigned int u = __float_as_uint(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

// f32_to_bf16: out [n] = bf16(inp [n]), one element per thread and step
// (inp may be a view at any float offset, so no wider loads).
__global__ void f32_to_bf16(unsigned short* out, const float* inp, i64 n) {
    GRID_STRIDE(i, n) out[i] = bf16_bits(inp[i]);
}
