//go:build cudaemu && !cuda

package cuda_test

import "github.com/rlhost/rlhost/gpu/cuda/internal/emutest"

// openEmulator is cuda.OpenEmulator, closed when the test ends.
var openEmulator = emutest.Open
