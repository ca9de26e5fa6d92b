package cuda

import (
	"fmt"
	"sync/atomic"
)

// Backend is the CUDA implementation of gpu.Backend on one GPU. Its methods
// may be called from any goroutine; they run one at a time.
type Backend struct {
	d *device
	// decodeUnfused switches generation's fused ops off (decode.go).
	decodeUnfused atomic.Bool
}

// Name reports "cuda/<device name>/sm_<cc>".
func (b *Backend) Name() string {
	return fmt.Sprintf("cuda/%s/sm_%d%d", b.d.name, b.d.cc[0], b.d.cc[1])
}

// FusedAttentionOnly is true: gpu/model runs padded training batches through
// the fused attention kernels (flashattn.cuh) too, so no [NH,T,T] tensor is
// materialised (gpu.FusedAttentionOnly).
func (b *Backend) FusedAttentionOnly() bool { return true }

// CublasLibrary is the cuBLAS library that was loaded (e.g. libcublas.so.12).
func (b *Backend) CublasLibrary() string { return b.d.blas.api.library() }
