//go:build cudaemu && !cuda

package cuda

import (
	"strings"
	"testing"
)

// TestMatmulAccumulatePlantedBug runs MatmulBackward with its accumulate
// mode overwriting dinp (beta 0 where it must be 1, plantMatmulOverwrite):
// the matmul checks of every precision must fail, naming the accumulated
// dinp, and so must the fp32 training step, whose q/k/v and gate/up input
// gradients are summed that way.
func TestMatmulAccumulatePlantedBug(t *testing.T) {
	be := openEmulator(t)
	checks := []Check{
		{"Matmul", checkMatmul}, {"MatmulBF16", checkMatmulBF16}, {"MatmulTF32", checkMatmulTF32},
		{"TrainStep", checkTrainStep},
	}
	for _, c := range checks[:3] {
		if err := c.Do(be); err != nil {
			t.Fatalf("%s fails without a defect: %v", c.Name, err)
		}
	}
	plantMatmulOverwrite = true
	defer func() { plantMatmulOverwrite = false }()
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
