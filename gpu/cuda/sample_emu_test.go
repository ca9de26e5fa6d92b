//go:build cudaemu && !cuda

package cuda

import (
	"strings"
	"testing"
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
