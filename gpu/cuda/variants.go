package cuda

import (
	"fmt"
	"os"
)

// VariantsEnv names the environment variable that selected kernel variants
// at run time, before the variants moved out of the product: the ones
// waiting for a GPU proof are builds of dev/cuda, which the kernel emulator
// runs and dev/cuda's benchmarks time (docs/gpu.md). A device refuses to
// open while it is set, so that a script written for the former selection
// does not time the default kernels twice.
const VariantsEnv = "RLHOST_CUDA_VARIANTS"

// variantsUnset is nil unless RLHOST_CUDA_VARIANTS is set.
func variantsUnset() error {
	if v, ok := os.LookupEnv(VariantsEnv); ok && v != "" {
		return fmt.Errorf("%s=%q: kernel variants are no longer selected at run time; "+
			"the ones waiting for a GPU proof are in dev/cuda, timed by its benchmarks (docs/gpu.md); unset it", VariantsEnv, v)
	}
	return nil
}
