// Kernels of the rlhost CUDA backend (gpu/cuda), one per op of gpu.Backend
// that is not a matrix product (those go to cuBLAS), one file per family
// (*.cuh, as llm.c's llmc/*.cuh). Built to PTX for sm_80
// and sm_90 by `make cuda-ptx` and embedded in the Go binary; the CPU
// reference of every kernel is gpu/cpu/backend.go and the tests compare them.
//
// Conventions:
//   - extern "C" names, loaded by name from Go (kernels.go lists them).
//   - Every integer argument is a long long and every pointer 8 bytes:
//     gorgonia.org/cu's Launch copies each argument as 8 bytes. Float
//     arguments are float; Go passes their bits in the low half of the slot.
//   - Shape letters as in gpu/ops.go: N tokens, C channels, V vocab, B batch,
//     T time, NH query heads, NKV key/value heads, HD head dim.
//   - Reductions: one block of BLOCK threads per row, warp shuffles then
//     shared memory; blockDim.x must be BLOCK.

#include "common.cuh"

extern "C" {
#include "bf16.cuh"  // first: bf16_bits, for the kernels that write bfloat16 copies of their outputs
#include "embedding.cuh"
#include "rmsnorm.cuh"
#include "matmul.cuh"
#include "rope.cuh"
#include "attention.cuh"
#include "flashattn.cuh"
#include "elementwise.cuh"
#include "logprob.cuh"
#include "optimizer.cuh"
#include "sample.cuh"
#include "decode.cuh"
}  // extern "C"
