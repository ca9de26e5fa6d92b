package cuda

import (
	"strings"
	"testing"
)

// TestVariantsEnvRefused: RLHOST_CUDA_VARIANTS, which selected kernel
// variants before they moved to dev/cuda, is refused while set (a device
// does not open), naming dev/cuda, so that a script written for it cannot
// time the default kernels against themselves unawares; unset or empty it
// is nothing.
func TestVariantsEnvRefused(t *testing.T) {
	t.Setenv(VariantsEnv, "decode_vec")
	if err := variantsUnset(); err == nil || !strings.Contains(err.Error(), VariantsEnv) ||
		!strings.Contains(err.Error(), "dev/cuda") || !strings.Contains(err.Error(), `"decode_vec"`) {
		t.Errorf("%s=decode_vec: %v", VariantsEnv, err)
	}
	t.Setenv(VariantsEnv, "")
	if err := variantsUnset(); err != nil {
		t.Errorf("%s empty: %v", VariantsEnv, err)
	}
}
