// Package cpu is the reference compute backend: the op set of gpu.Backend in
// Go, with matrix products through OpenBLAS cblas_sgemm via cgo
// (Debian libopenblas-dev; link flag -lopenblas).
//
// # Threading model
//
// Three kinds of parallelism, never nested:
//
//   - Large matrix products (training, prefill) run on OpenBLAS's own thread
//     pool (one thread per core by default; OPENBLAS_NUM_THREADS changes it).
//     Sgemm is only ever called from one goroutine at a time by this package.
//   - The products of generation and the cached attention run on a C
//     thread pool (pool.c): the caller and GOMAXPROCS-1 helpers claim their
//     parts one at a time; helpers spin for a while after a job, so the many
//     short products of a decode step are handed over without a futex
//     wake-up, and the caller never waits for a helper that has not started.
//   - Row-wise loops (RMSNorm, RoPE, softmax, SwiGLU, log-softmax, AdamW, the
//     attention softmax) are split into contiguous chunks over GOMAXPROCS
//     goroutines when the work is large enough to pay for it; small inputs
//     run on the calling goroutine.
//
// # Core type
//
// The OpenBLAS in Debian bookworm (0.3.21) does not recognise recent Xeons and
// falls back to a kernel without AVX, five times slower. EnsureCoreType picks
// OPENBLAS_CORETYPE from the CPU flags (AVX-512 -> SkylakeX, AVX2 -> Haswell)
// when the user has not set it, and re-executes the program so the library
// sees it at load time. Programs call it first thing in main (tests in
// TestMain); SelfCheck compares one sgemm with a naive product.
package cpu
