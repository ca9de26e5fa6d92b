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
// and in `rlhost selftest --device cuda`); a variant stays opt-in until a
// GPU has measured it against the default in the same run
// (scripts/gpu/proof.sh, PROOF_VARIANTS), and becomes the default only then.
type Variants struct {
	// FlashMMA runs the fused attention kernels' products on the bf16
	// tensor cores (mma.sync m16n8k16) instead of fp32 CUDA cores.
	FlashMMA bool
	// DecodeSplit splits the cached positions of a decode's attention
	// across blocks and combines their partial softmaxes (flash-decoding).
	DecodeSplit bool
	// SampleHist finds the cut of flat rows in sample_tokens with one
	// histogram pass per 8 bits of the logit keys instead of bisection.
	SampleHist bool
}

// variantNames maps each name RLHOST_CUDA_VARIANTS accepts to its field.
var variantNames = map[string]func(*Variants) *bool{
	"flash_mma":    func(v *Variants) *bool { return &v.FlashMMA },
	"decode_split": func(v *Variants) *bool { return &v.DecodeSplit },
	"sample_hist":  func(v *Variants) *bool { return &v.SampleHist },
}

// ParseVariants reads a comma-separated list of variant names ("all" for
// every one); an unknown name is an error naming the known ones.
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
