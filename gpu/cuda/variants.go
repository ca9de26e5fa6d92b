package cuda

import (
	"fmt"
	"os"
	"sort"
	"strings"
)

// VariantsEnv names the environment variable that selects kernel variants
// when a device opens: a comma-separated list of variant names (Variants),
// empty for the default kernels.
const VariantsEnv = "RLHOST_CUDA_VARIANTS"

// Variants selects alternatives to the default kernels. Every variant
// computes what its default computes (the same checks hold, on the emulator
// and in `rlhost selftest --device cuda`). A new kernel comes as an opt-in
// variant and becomes the default once a GPU has measured it faster than
// the default in the same run (scripts/gpu/proof.sh, PROOF_VARIANTS); the
// kernel it replaced is then deleted (retiredVariants; the measurements
// stay in docs/bench/history). SwiGLURecompute and LogprobTwoPass are the former
// defaults replaced before a GPU timed their replacements: the one runs
// the same formulas with a pass over [N, F] tensors fewer a layer, the
// other reads the logits once where the former read them twice, so they
// kept no opt-in stage, and the next proof times each pair.
// FlashFwdLdsm, SampleSplit and DecodeVec are new kernels, opt-in until a
// GPU has timed them against the default.
type Variants struct {
	// SwiGLURecompute runs the training step's MLP backward as it ran
	// before SwiGLUBackwardH: swiglu_forward recomputes h, then the down
	// product's input and weight gradients, then swiglu_backward, instead
	// of the input gradient, then swiglu_backward_h (dgate, dup and h in
	// one pass over gate and up), then the weight gradients that read h
	// (gpu.SwiGLURecompute; the same formulas, the same values).
	SwiGLURecompute bool
	// LogprobTwoPass runs the log-softmax forward as
	// logprob_forward_twopass, which reads each row of logits twice (its
	// max, then the sums of exp(z-max) and exp(z-max)*(z-max)), instead of
	// logprob_forward, which reads it once, each thread keeping a running
	// max and rescaling its sums when it grows (kernels/logprob.cuh).
	LogprobTwoPass bool
	// FlashFwdLdsm runs the tensor-core forward (head dimensions up to 64)
	// as flash_attention_forward_ldsm_mma64: each key tile's K and V staged
	// once, straight, into one of two buffers, K's fragments read with
	// ldmatrix and V's with ldmatrix.trans, the next tile's loads in flight
	// during the products, one __syncthreads a tile, and the softmax in
	// base 2 (ex2.approx); instead of flash_attention_forward_mma64, which
	// stages V again transposed, with two __syncthreads a tile and expf.
	// The same products in the same order (built with expf, on the
	// emulator, out and lse are the default's bits). It applies where the
	// tensor-core attention runs (bf16 products). An opt-in variant: not
	// yet timed on a GPU.
	FlashFwdLdsm bool
	// ClipScale runs ClipAdamW as gpu.ClipGradNorm (the norm down, then
	// `scale` over the gradients when it clips) followed by AdamW, instead
	// of the norm's factor made on the device (clip_coef) and applied by
	// adamw as it reads each gradient (the same values).
	ClipScale bool
	// SampleSplit samples a call whose rows are all greedy, unfiltered, or
	// top-k with 0 < K <= 128 (with or without top-p) by
	// sample_split_max, sample_split_sum and sample_split_pick: each row
	// cut into slices read by a block each, then merged by a block a row,
	// instead of one block a row through every pass (sample_tokens_hist).
	// Other calls run the default kernel. The same cuts and draws as
	// SampleRow. An opt-in variant: not yet timed on a GPU.
	SampleSplit bool
	// DecodeVec runs flash-decoding's split kernel as
	// attention_cached_split_vec, whose output pass loads V rows as
	// 16-byte vectors, two rows a thread at a time (heads of a multiple
	// of 4 dimensions, at most 1024), instead of one float a position a
	// thread. The scores and the softmax are the default's; the output's
	// sums run in another order. An opt-in variant: not yet timed on a
	// GPU.
	DecodeVec bool
}

// variantNames maps each name RLHOST_CUDA_VARIANTS accepts to its field.
var variantNames = map[string]func(*Variants) *bool{
	"swiglu_recompute": func(v *Variants) *bool { return &v.SwiGLURecompute },
	"logprob_twopass":  func(v *Variants) *bool { return &v.LogprobTwoPass },
	"flash_fwd_ldsm":   func(v *Variants) *bool { return &v.FlashFwdLdsm },
	"clip_scale":       func(v *Variants) *bool { return &v.ClipScale },
	"sample_split":     func(v *Variants) *bool { return &v.SampleSplit },
	"decode_vec":       func(v *Variants) *bool { return &v.DecodeVec },
}

// retiredVariants are the names of variants a GPU proof settled: the ones
// it promoted to the default kernels, and the former defaults it measured
// slower, since deleted. A name of them is an error saying which: accepted,
// it would select nothing, and a measurement of it against the default
// would time the default twice.
var retiredVariants = map[string]string{
	"flash_mma":       "the default kernel now (an H100 proof at b593c0c)",
	"decode_split":    "the default kernel now (an H100 proof at b593c0c)",
	"sample_hist":     "the default kernel now (an H100 proof at b593c0c)",
	"flash_dkv_heads": "the default kernel now (an H100 proof at 960b55b)",
	"flash_dq_ldsm":   "the default kernel now (an H100 proof at 960b55b)",
	"flash_simt":      "deleted: an H100 proof at b593c0c measured the tensor-core attention faster",
	"decode_block":    "deleted: an H100 proof at b593c0c measured flash-decoding faster",
	"sample_bisect":   "deleted: an H100 proof at b593c0c measured the radix select faster",
	"flash_dkv_group": "deleted: an H100 proof at 960b55b measured the per-head dK/dV faster",
	"flash_dq_stage":  "deleted: an H100 proof at 960b55b measured the ldmatrix dQ faster",
}

// ParseVariants reads a comma-separated list of variant names ("all" for
// every one); an unknown name is an error naming the known ones, and the
// name of a variant a GPU proof settled an error saying how.
func ParseVariants(s string) (Variants, error) {
	var v Variants
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		switch {
		case name == "":
		case name == "all":
			for _, f := range variantNames {
				*f(&v) = true
			}
		case variantNames[name] != nil:
			*variantNames[name](&v) = true
		case retiredVariants[name] != "":
			return Variants{}, fmt.Errorf("%s: variant %q is %s; drop it", VariantsEnv, name, retiredVariants[name])
		default:
			return Variants{}, fmt.Errorf("%s: unknown kernel variant %q (known: %s, all)", VariantsEnv, name, strings.Join(knownVariants(), ", "))
		}
	}
	return v, nil
}

// String lists the selected variants by name, "default" when none is.
func (v Variants) String() string {
	var on []string
	for _, name := range knownVariants() {
		if *variantNames[name](&v) {
			on = append(on, name)
		}
	}
	if len(on) == 0 {
		return "default"
	}
	return strings.Join(on, ",")
}

func knownVariants() []string {
	names := make([]string, 0, len(variantNames))
	for name := range variantNames {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// variantsFromEnv is the selection of RLHOST_CUDA_VARIANTS.
func variantsFromEnv() (Variants, error) { return ParseVariants(os.Getenv(VariantsEnv)) }
