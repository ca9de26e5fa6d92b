//go:build cudaemu && !cuda

package cuda

import "github.com/rlhost/rlhost/gpu/cuda/internal/emu"

// EmuPlanted is internal/emu's Planted: per kernel, the build of dev/cuda
// the emulator runs in its place.
var EmuPlanted = emu.Planted

// The variants of dev/cuda waiting for a GPU proof, as cudacheck.Variant
// switches on the emulator (sample_split: SampleSplitOn).
var (
	DecodeVec      = BuildVariant("attention_cached_split", "vec")
	FlashFwdLdsm   = BuildVariant("flash_attention_forward_mma64", "ldsm")
	LogprobTwoPass = BuildVariant("logprob_forward", "twopass")
)
