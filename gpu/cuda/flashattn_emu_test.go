//go:build cudaemu && !cuda

package cuda

import (
	"strings"
	"testing"
)

// TestFlashAttentionEmulator runs the fused attention's check on the
// emulator (TestKernelsOnEmulator runs it too, among all the checks).
func TestFlashAttentionEmulator(t *testing.T) {
	if err := (Check{"AttentionVarlen", checkAttentionVarlen}).Do(openEmulator(t)); err != nil {
		t.Fatal(err)
	}
}

// TestFlashAttentionPlantedBugs runs the check with a defect planted in one
// kernel at a time (flashattn.cuh's FA_BUG_*: a missing __syncthreads, the
// diagonal tile left out of the causal range, a log-sum-exp without the row
// maximum): each must make the check fail, naming the tensor it broke.
func TestFlashAttentionPlantedBugs(t *testing.T) {
	be := openEmulator(t)
	for _, tc := range []struct {
		kernel, defect, tensor string
	}{
		{"flash_attention_forward", "nosync", "out"},
		{"flash_attention_forward", "tile", "out"},
		{"flash_attention_forward", "lse", "lse"},
		{"flash_attention_backward_dkv", "nosync", "dk"},
		{"flash_attention_backward_dkv", "tile", "dk"},
		{"flash_attention_backward_dq", "nosync", "dq"},
		{"flash_attention_backward_dq", "tile", "dq"},
	} {
		t.Run(tc.kernel+"/"+tc.defect, func(t *testing.T) {
			emuPlanted[tc.kernel] = tc.defect
			defer delete(emuPlanted, tc.kernel)
			err := (Check{"AttentionVarlen", checkAttentionVarlen}).Do(be)
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
