//go:build cudaemu && !cuda

package cuda_test

import (
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
)

// TestMatmulAccumulatePlantedBug runs MatmulBackward with its accumulate
// mode overwriting dinp (beta 0 where it must be 1, plantMatmulOverwrite):
// the matmul checks of every precision must fail, naming the accumulated
// dinp, and so must the fp32 training step, whose q/k/v and gate/up input
// gradients are summed that way.
func TestMatmulAccumulatePlantedBug(t *testing.T) {
	be := openEmulator(t)
	checks := []cudacheck.Check{
		{Name: "Matmul", Run: cudacheck.CheckMatmul}, {Name: "MatmulBF16", Run: cudacheck.CheckMatmulBF16}, {Name: "MatmulTF32", Run: cudacheck.CheckMatmulTF32},
		{Name: "TrainStep", Run: cudacheck.CheckTrainStep},
	}
	for _, c := range checks[:3] {
		if err := c.Do(be); err != nil {
			t.Fatalf("%s fails without a defect: %v", c.Name, err)
		}
	}
	cuda.SetPlantMatmulOverwrite(true)
	defer cuda.SetPlantMatmulOverwrite(false)
	for _, c := range checks {
		err := c.Do(be)
		if err == nil {
			t.Errorf("%s passed with accumulate overwriting dinp", c.Name)
			continue
		}
		if c.Name != "TrainStep" && !strings.Contains(err.Error(), "dinp (accumulated)") {
			t.Errorf("%s: error %q does not name the accumulated dinp", c.Name, err)
		}
		t.Logf("%s: %v", c.Name, err)
	}
}
