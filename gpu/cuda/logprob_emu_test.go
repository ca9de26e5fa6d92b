//go:build cudaemu && !cuda

package cuda_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
)

// TestLogprobRowsDiffs runs the rows of the check LogprobRows on the
// emulator and logs, for logp, entropy and lse, the largest differences of
// the kernel from the CPU reference, absolute and relative to max(1,
// |value|), with the row that gave each; they must lie inside the check's
// tolerance.
func TestLogprobRowsDiffs(t *testing.T) {
	outs := cudacheck.LogprobOuts(openEmulator(t))
	for q, name := range cudacheck.LogprobOutNames {
		var worstAbs, worstRel float64
		atAbs, atRel := "all equal", "all equal"
		for _, o := range outs {
			d := math.Abs(float64(o.Dev[q]) - float64(o.Cpu[q]))
			rel := d / max(1, math.Abs(float64(o.Cpu[q])))
			row := fmt.Sprintf("V=%d %s", o.V, o.Row.Kind)
			if d > worstAbs {
				worstAbs, atAbs = d, row
			}
			if rel > worstRel {
				worstRel, atRel = rel, row
			}
			if !(rel <= cudacheck.LogprobTol) {
				t.Errorf("%s: %g on the device, %g on the CPU at V=%d %s", name, o.Dev[q], o.Cpu[q], o.V, o.Row.Kind)
			}
		}
		t.Logf("%-7s max |diff| %.3g (%s), relative %.3g (%s)", name, worstAbs, atAbs, worstRel, atRel)
	}
}

// TestLogprobPlanted: the check LogprobRows fails with a defect planted in
// the kernel (dev/cuda/logprob.edits): a thread's rescale of sez to a
// larger max without the shift -dm*se, and the merge adding thread 0's
// sums without moving them to the row's max (either fails rows of every V
// the check has but 1).
func TestLogprobPlanted(t *testing.T) {
	be := openEmulator(t)
	rows := checkNamed(t, "LogprobRows")
	for _, defect := range []string{"sez", "merge"} {
		t.Run(defect, func(t *testing.T) {
			cuda.EmuPlanted["logprob_forward"] = defect
			defer delete(cuda.EmuPlanted, "logprob_forward")
			err := rows.Do(be)
			if err == nil {
				t.Fatalf("LogprobRows passed with %s planted in logprob_forward", defect)
			}
			t.Log(err)
			// checkLogprob's rows (V 1000: a float4 or two a thread) may
			// not show the rescale's defect; logged, not required
			t.Logf("Logprob: %v", (cudacheck.Check{Name: "Logprob", Run: cudacheck.CheckLogprob}).Do(be))
		})
	}
}
