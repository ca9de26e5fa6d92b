//go:build cudaemu && !cuda

package cuda

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu"
)

// TestSampleHistEmulator runs the sample_hist variant's check on the
// emulator (TestKernelsOnEmulator runs it too, among all the checks): the
// radix-select kernel gives the default kernel's tokens and log-probs.
func TestSampleHistEmulator(t *testing.T) {
	if err := (Check{"SampleHist", checkSampleHist}).Do(openEmulator(t)); err != nil {
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
	if err := (Check{"SampleHist", checkSampleHist}).Do(openEmulator(t)); err != nil {
		t.Fatal(err)
	}
}

// TestSampleHistPlantedBugs: the check fails with a defect planted in the
// variant's kernel: the top-k count scan one member late (top-k keeps K+1),
// and the skewed guesses taken without hist_settle's test (wrong top-p cuts
// and draws).
func TestSampleHistPlantedBugs(t *testing.T) {
	be := openEmulator(t)
	for _, defect := range []string{"topk", "unsettled"} {
		t.Run(defect, func(t *testing.T) {
			emuPlanted["sample_tokens_hist"] = defect
			defer delete(emuPlanted, "sample_tokens_hist")
			err := (Check{"SampleHist", checkSampleHist}).Do(be)
			if err == nil {
				t.Fatalf("the check passed with %s planted in sample_tokens_hist", defect)
			}
			if !strings.Contains(err.Error(), "sample_hist token") {
				t.Errorf("error %q is not the comparison with the default kernel", err)
			}
			t.Log(err)
		})
	}
}

// TestTransferSampleHist: SampleTokens with the sample_hist variant on
// flat rows (3000 candidates each: the radix select runs) moves what the
// default moves: the same bytes and copies, one launch, one
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
	for i, on := range []bool{false, true} {
		be.SetVariants(Variants{SampleHist: on})
		tok[i] = make([]int32, M)
		lp := make([]float32, M)
		be.SampleTokens(tok[i], lp, z, params, M, V) // the arena grows here
		be.ResetCounters()
		be.SampleTokens(tok[i], lp, z, params, M, V)
		c[i] = be.Counters()
		c[i].SyncWait = 0 // a time, not a count
	}
	if c[1] != c[0] || c[1].Launches != 1 || c[1].Syncs != 1 || c[1].Allocs != 0 {
		t.Errorf("sample_hist: %+v; the default kernel %+v (want the same, one launch, one sync, no allocation)", c[1], c[0])
	}
	for i := range tok[0] {
		if tok[1][i] != tok[0][i] {
			t.Errorf("row %d: token %d with sample_hist, %d with the default", i, tok[1][i], tok[0][i])
		}
	}
}
