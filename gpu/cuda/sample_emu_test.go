//go:build cudaemu && !cuda

package cuda

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu"
)

// TestSampleHistEmulator runs the check of the two sampling kernels on
// the emulator (TestKernelsOnEmulator runs it too, among all the checks):
// the radix-select kernel, the default, gives the bisection's (the
// sample_bisect variant's) tokens and log-probs.
func TestSampleHistEmulator(t *testing.T) {
	if err := (Check{"SampleBisect", checkSampleBisect}).Do(openEmulator(t)); err != nil {
		t.Fatal(err)
	}
}

// TestSampleHistSkewEmulator runs the check with every mass-based guess of
// the radix select one key off (sample.cuh SH_SKEW: above the answer for
// the draw, below it for top-p): hist_settle's exact test must catch each
// and bisect to the default's cut, so the check still passes. It is what a
// guess spoilt by the fp32 masses' rounding goes through.
func TestSampleHistSkewEmulator(t *testing.T) {
	emuPlanted["sample_tokens_hist"] = "skew"
	defer delete(emuPlanted, "sample_tokens_hist")
	if err := (Check{"SampleBisect", checkSampleBisect}).Do(openEmulator(t)); err != nil {
		t.Fatal(err)
	}
}

// TestSampleHistPlantedBugs: the check fails with a defect planted in the
// radix-select kernel, the default: the top-k count scan one member late (top-k keeps K+1),
// and the skewed guesses taken without hist_settle's test (wrong top-p cuts
// and draws).
func TestSampleHistPlantedBugs(t *testing.T) {
	be := openEmulator(t)
	for _, defect := range []string{"topk", "unsettled"} {
		t.Run(defect, func(t *testing.T) {
			emuPlanted["sample_tokens_hist"] = defect
			defer delete(emuPlanted, "sample_tokens_hist")
			err := (Check{"SampleBisect", checkSampleBisect}).Do(be)
			if err == nil {
				t.Fatalf("the check passed with %s planted in sample_tokens_hist", defect)
			}
			if !strings.Contains(err.Error(), "sample_hist token") {
				t.Errorf("error %q is not the comparison of the two kernels", err)
			}
			t.Log(err)
		})
	}
}

// TestTransferSampleHist: SampleTokens on flat rows (3000 candidates
// each: the radix select runs), by default and with the sample_bisect
// variant on, moves the same: the same bytes and copies, one launch, one
// synchronisation and no allocation once the arena has grown; and gives
// the same tokens.
func TestTransferSampleHist(t *testing.T) {
	be := openEmulator(t)
	const M, V = 4, 3000
	r := rand.New(rand.NewPCG(5, 5))
	z := be.Alloc("logits", M*V)
	defer be.Free(z)
	be.Upload(z, randn(r, M*V, 0.01))
	params := make([]gpu.SampleParams, M)
	for i := range params {
		params[i] = gpu.SampleParams{Temperature: 1, TopK: 50, TopP: 0.95, U: r.Float64()}
	}
	var c [2]Counters
	var tok [2][]int32
	for i, bisect := range []bool{false, true} {
		be.SetVariants(Variants{SampleBisect: bisect})
		tok[i] = make([]int32, M)
		lp := make([]float32, M)
		be.SampleTokens(tok[i], lp, z, params, M, V) // the arena grows here
		be.ResetCounters()
		be.SampleTokens(tok[i], lp, z, params, M, V)
		c[i] = be.Counters()
		c[i] = c[i].Counts() // the times apart
	}
	if c[1] != c[0] || c[1].Launches != 1 || c[1].Syncs != 1 || c[1].Allocs != 0 {
		t.Errorf("sample_bisect: %+v; the default kernel %+v (want the same, one launch, one sync, no allocation)", c[1], c[0])
	}
	for i := range tok[0] {
		if tok[1][i] != tok[0][i] {
			t.Errorf("row %d: token %d with sample_bisect, %d with the default", i, tok[1][i], tok[0][i])
		}
	}
}
