// Package cuda is the NVIDIA GPU backend of the op set in gpu.Backend, built
// only with the build tag `cuda` (go build -tags cuda).
//
// Without the tag New returns ErrNotBuilt, so that the trainer can name the
// problem ("rebuild with -tags cuda"); nothing untagged imports
// gorgonia.org/cu, whose init exits the process on a machine without a GPU.
// With the tag cudaemu instead, OpenEmulator runs the kernels' CUDA C on the
// CPU (each GPU thread a fiber, internal/emu), for tests on machines without
// a GPU; it also runs dev/cuda's builds (the kernel variants waiting for a
// GPU proof and the planted defects) in a kernel's place (UseBuild).
//
// With the tag:
//
//   - The driver API comes from gorgonia.org/cu (context, stream, memory,
//     module loading, kernel launch); libcuda.so.1 is the only CUDA library
//     linked.
//   - The kernels are CUDA C (kernels/kernels.cu) compiled by nvcc to PTX for
//     sm_80 and sm_90 and embedded in the binary; the driver JIT-compiles the
//     PTX for the GPU at New.
//   - Matrix products go through cuBLAS, loaded at run time with dlopen
//     (libcublas.so.13, .12, then .11, on LD_LIBRARY_PATH, the system paths
//     and the pip layouts of the Pythons on PATH), so one binary runs with any:
//     Sgemm, SgemmStridedBatched and GemmEx are wrapped here (gorgonia.org/cu/blas
//     has neither of the last two).
//   - Tensors are backend-owned (gpu.Memory): Alloc returns a slice whose
//     address is device memory from cuMemAlloc (never managed memory), which
//     ops use in place and the host reaches only through Upload, Download,
//     Zero and Copy. A host slice given to an op is staged through the
//     device for that op and counted (Counters).
//   - Work is queued on one stream; an op waits for it only when it wrote
//     a host slice, and Download waits before copying. A device failure (a
//     failed launch) panics with an *Error naming the op, since gpu.Backend
//     ops do not return errors; out of memory panics with a
//     *gpu.MemoryError naming the tensor.
//
// Package cudacheck compares every kernel, the cuBLAS wrappers, training
// steps and KV-cache generation with the CPU reference gpu/cpu, on any
// Device: `rlhost selftest --device cuda` runs the checks on a GPU, this
// package's tests on the emulator, and cudacheck's own tests on gpu/cpu
// itself, with and without planted errors.
// docs/gpu.md tells how to build and verify an installation.
package cuda
