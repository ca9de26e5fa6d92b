//go:build cudaemu && !cuda

package cuda

import (
	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda/internal/emu"
)

// EmuPlanted is internal/emu's Planted: per kernel, the build of dev/cuda
// the emulator runs in its place.
var EmuPlanted = emu.Planted

// SampleHist sends every call of SampleTokens on be to sample_tokens_hist
// while on (the calls the split path takes too), to compare the two: a
// cudacheck.Variant.
func SampleHist(be *Backend) func(on bool) {
	return func(on bool) {
		if !on {
			be.d.sampleHook = nil
			return
		}
		be.d.sampleHook = func(a *arena, tokens []int32, logp, logits []float32, params []gpu.SampleParams, M, V int) bool {
			be.d.sampleHist(a, tokens, logp, logits, params, M, V)
			return true
		}
	}
}
