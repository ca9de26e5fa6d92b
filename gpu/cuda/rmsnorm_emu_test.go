//go:build cudaemu && !cuda

package cuda_test

import (
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
)

// TestResidualRMSNormPlantedBugs runs the fused residual + norm check with a
// defect planted in one kernel at a time (dev/cuda/rmsnorm.edits: the
// forward's rstd from a alone, the backward overwriting dres instead of
// adding to it, the backward leaving the second output gradient out of
// dinp): each must make the check fail, naming the tensor it broke.
func TestResidualRMSNormPlantedBugs(t *testing.T) {
	be := openEmulator(t)
	check := cudacheck.Check{Name: "ResidualRMSNorm", Run: cudacheck.CheckResidualRMSNorm}
	if err := check.Do(be); err != nil {
		t.Fatalf("the check fails without a defect: %v", err)
	}
	for _, tc := range []struct {
		kernel, defect, tensor string
	}{
		{"residual_rmsnorm_forward", "norm_a", "out"},
		{"rmsnorm_backward_dinp", "overwrite", "dres"},
		{"rmsnorm_backward_dinp", "no_dout2", "dres (dout + dout2)"},
	} {
		t.Run(tc.kernel+"/"+tc.defect, func(t *testing.T) {
			cuda.EmuPlanted[tc.kernel] = tc.defect
			defer delete(cuda.EmuPlanted, tc.kernel)
			err := check.Do(be)
			if err == nil {
				t.Fatalf("the check passed with %s planted in %s", tc.defect, tc.kernel)
			}
			if !strings.Contains(err.Error(), tc.tensor) {
				t.Errorf("error %q does not name %s", err, tc.tensor)
			}
			t.Log(err)
		})
	}
}
