//go:build cudaemu

package cuda_test

import (
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
)

// TestChecksWithAllVariants runs every check with every variant of
// dev/cuda that waits for a GPU proof in its default's place (decode_vec,
// flash_fwd_ldsm, logprob_twopass, sample_split): the checks written for
// the default kernels hold with the variants too. Then each variant's own
// check, which compares it with the default, runs alone.
func TestChecksWithAllVariants(t *testing.T) {
	be := openEmulator(t)
	split := sampleSplit(be)
	all := []func(bool){cuda.DecodeVec, cuda.FlashFwdLdsm, cuda.LogprobTwoPass, split.On}
	for _, on := range all {
		on(true)
	}
	for _, c := range cudacheck.Checks {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Do(be); err != nil {
				t.Fatal(err)
			}
		})
	}
	for _, on := range all {
		on(false)
	}
	for _, c := range []cudacheck.Check{
		{Name: "AttentionCachedVec", Run: func(d cudacheck.Device) error { return cudacheck.CheckAttentionCachedVec(d, cuda.DecodeVec) }},
		{Name: "GenerateDecodeVec", Run: func(d cudacheck.Device) error { return cudacheck.CheckGenerateDecodeVec(d, cuda.DecodeVec) }},
		{Name: "AttentionVarlenFwdLdsm", Run: func(d cudacheck.Device) error { return cudacheck.CheckAttentionVarlenFwdLdsm(d, cuda.FlashFwdLdsm) }},
		{Name: "LogprobTwoPass", Run: func(d cudacheck.Device) error { return cudacheck.CheckLogprobTwoPass(d, cuda.LogprobTwoPass) }},
		{Name: "GenerateSampleSplit", Run: func(d cudacheck.Device) error { return cudacheck.CheckGenerateSampleSplit(d, split) }},
	} {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Do(be); err != nil {
				t.Fatal(err)
			}
			if len(cuda.EmuPlanted) != 0 {
				t.Fatalf("the check left builds in their kernels' place: %v", cuda.EmuPlanted)
			}
		})
	}
}
