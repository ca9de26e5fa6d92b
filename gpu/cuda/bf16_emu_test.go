//go:build cudaemu && !cuda

package cuda_test

import (
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
)

// bf16Checks are the mixed-precision checks (TestKernelsOnEmulator runs
// them among all the checks; TestBF16PlantedBugs runs them with defects).
var bf16Checks = []cudacheck.Check{
	{Name: "ToBF16", Run: cudacheck.CheckToBF16}, {Name: "GemmBF16", Run: cudacheck.CheckGemmBF16}, {Name: "GemmStridedBatchedBF16", Run: cudacheck.CheckGemmStridedBatchedBF16},
	{Name: "MatmulBF16", Run: cudacheck.CheckMatmulBF16}, {Name: "MatmulTF32", Run: cudacheck.CheckMatmulTF32},
	{Name: "TrainStepBF16", Run: cudacheck.CheckTrainStepBF16}, {Name: "TrainStepTF32", Run: cudacheck.CheckTrainStepTF32},
}

// TestMixedPrecisionEmulator logs the measured differences of the
// mixed-precision training step from the fp32 CPU reference on the
// emulator (the figures in docs/gpu.md; TestKernelsOnEmulator runs the
// checks themselves) and requires the backend to be back in FP32 after it.
func TestMixedPrecisionEmulator(t *testing.T) {
	be := openEmulator(t)
	for _, p := range []cuda.Precision{cuda.BF16, cuda.TF32} {
		d, err := cudacheck.MixedStepDiffs(be, p, cudacheck.MixedStepConfig)
		if err != nil {
			t.Fatal(err)
		}
		for s := 0; s < 2; s++ {
			t.Logf("%v step %d: max |logp diff| %.3g (row %d: %.6g vs %.6g), |loss diff| %.3g (%.6g vs %.6g), gradient norm relative diff %.3g",
				p, s+1, d.Logp[s], d.At[s], d.Got[s], d.Want[s], d.Loss[s], d.LossGot[s], d.LossWant[s], d.Norm[s])
			if tol := cudacheck.MixedTolerance[p]; !(d.Logp[s] <= tol.Logp && d.Loss[s] <= tol.Loss) {
				t.Errorf("%v step %d beyond the tolerance (%g, %g)", p, s+1, tol.Logp, tol.Loss)
			}
		}
	}
	if p := be.Precision(); p != cuda.FP32 {
		t.Errorf("the measurement left the backend in %v", p)
	}
}

// TestBF16PlantedBugs plants one defect at a time in the bf16 path: the
// conversion kernel truncating instead of rounding to nearest even
// (f32_to_bf16/truncate), the weights' bfloat16 copies never
// refreshed after a write (an AdamW step, an upload), a weight view's
// offset in its tensor's copy ignored, the shared copy of an
// activation operand kept after its tensor was written (actstale) or
// freed and its memory given to a new tensor (actfree), the ops that
// write their output's copy (the norms, SwiGLU, AdamW) writing none but
// making it valid all the same (prodskip), the fused residual norm's copy
// made of its sum instead of its output (residual_rmsnorm_forward/copy_res),
// the norm backward's copy of the residual stream's gradient made before
// its add (rmsnorm_backward_dinp/copy_noadd), RoPE's backward copies of dq and dk made
// before the rotation (rope_qk/copy_unrotated) and AdamW's copy
// made of the parameters before the update (optimizer.cuh
// adamw/stale_copy). Each must make the named checks fail
// (only those run: the emulator is slow, and the checks' passing without a
// defect is TestKernelsOnEmulator's).
func TestBF16PlantedBugs(t *testing.T) {
	checks := map[string]cudacheck.Check{}
	for _, c := range bf16Checks {
		checks[c.Name] = c
	}
	be := openEmulator(t)
	for _, tc := range []struct {
		kernel, plant string // an emulator kernel defect, or a planted bug of bf16.go
		fail          []string
	}{
		{kernel: "f32_to_bf16/truncate", fail: []string{"ToBF16", "GemmBF16", "GemmStridedBatchedBF16", "MatmulBF16"}},
		// AdamW writes the parameters' copy, so the training step no
		// longer converts them after a write: an Upload is where this
		// shows (prodskip and adamw/stale_copy are its training-step cases)
		{plant: "stale", fail: []string{"MatmulBF16"}},
		{plant: "offset", fail: []string{"MatmulBF16", "TrainStepBF16"}},
		{plant: "actstale", fail: []string{"MatmulBF16"}},
		{plant: "actfree", fail: []string{"MatmulBF16"}},
		{plant: "prodskip", fail: []string{"MatmulBF16", "TrainStepBF16"}},
		{kernel: "residual_rmsnorm_forward/copy_res", fail: []string{"MatmulBF16", "TrainStepBF16"}},
		{kernel: "adamw/stale_copy", fail: []string{"MatmulBF16", "TrainStepBF16"}},
		{kernel: "rmsnorm_backward_dinp/copy_noadd", fail: []string{"MatmulBF16", "TrainStepBF16"}},
		// the training step's log-probs move by 5e-6 with it, far
		// inside TrainStepBF16's tolerance: TestSharedBF16SameValues
		// finds it there, bit for bit
		{kernel: "rope_qk/copy_unrotated", fail: []string{"MatmulBF16"}},
	} {
		t.Run(tc.kernel+tc.plant, func(t *testing.T) {
			if tc.kernel != "" {
				k, defect, _ := strings.Cut(tc.kernel, "/")
				cuda.EmuPlanted[k] = defect
				defer delete(cuda.EmuPlanted, k)
			}
			be.SetPlantBF16(tc.plant)
			defer be.SetPlantBF16("")
			for _, name := range tc.fail {
				if err := checks[name].Do(be); err == nil {
					t.Errorf("%s passed with the bug planted", name)
				} else {
					t.Logf("%s: %v", name, err)
				}
			}
		})
	}
}
