// Package kernels holds the CUDA sources of gpu/cuda's kernels (kernels.cu
// and its families, *.cuh), which `make cuda-ptx` builds to the PTX that
// gpu/cuda embeds and the kernel emulator (gpu/cuda/internal/emu) compiles
// for the CPU.
package kernels

import "embed"

// Sources are the kernel sources. The emulator imports them so that the Go
// build cache rebuilds it when a kernel changes: cgo does not track the
// files its C++ includes from another directory.
//
//go:embed *.cu *.cuh
var Sources embed.FS
