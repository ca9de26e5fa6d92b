//go:build cudaemu && !cuda

package dist

import (
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
)

// TestDataParallelMatchesOneRankEmulator is TestDataParallelMatchesOneRank with each rank on
// its own emulated CUDA device (the kernels of gpu/cuda run on the CPU), the communicator
// reaching the devices' memory through OnDevice: the bucketed all-reduce and ZeRO-1's
// in-place exchanges in the devices' own gradient and parameter buffers reach one device's
// weights, norms and moments, and the planted defects still fail.
func TestDataParallelMatchesOneRankEmulator(t *testing.T) {
	defer func(f func() (gpu.Backend, func())) { dpBackend, dpOnDevice = f, false }(dpBackend)
	dpOnDevice = true
	dpBackend = func() (gpu.Backend, func()) {
		be := cuda.OpenEmulator()
		return be, func() { be.Close() }
	}
	TestDataParallelMatchesOneRank(t)
}
