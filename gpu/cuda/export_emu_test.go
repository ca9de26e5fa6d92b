//go:build cudaemu && !cuda

package cuda

// EmuPlanted is emu.go's emuPlanted: per kernel, the planted defect the
// emulator runs in its place.
var EmuPlanted = emuPlanted

// The variants of dev/cuda waiting for a GPU proof, as cudacheck.Variant
// switches on the emulator (sample_split: SampleSplitOn).
var (
	DecodeVec      = BuildVariant("attention_cached_split", "vec")
	FlashFwdLdsm   = BuildVariant("flash_attention_forward_mma64", "ldsm")
	LogprobTwoPass = BuildVariant("logprob_forward", "twopass")
)
