package cuda

import (
	"strings"
	"testing"
)

func TestParseVariants(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Variants
		str  string
	}{
		{"", Variants{}, "default"},
		{" decode_vec , sample_split", Variants{DecodeVec: true, SampleSplit: true}, "decode_vec,sample_split"},
		{"swiglu_recompute", Variants{SwiGLURecompute: true}, "swiglu_recompute"},
		{"logprob_twopass", Variants{LogprobTwoPass: true}, "logprob_twopass"},
		{"flash_fwd_ldsm", Variants{FlashFwdLdsm: true}, "flash_fwd_ldsm"},
		{"clip_scale", Variants{ClipScale: true}, "clip_scale"},
		{"decode_vec", Variants{DecodeVec: true}, "decode_vec"},
		{"sample_split", Variants{SampleSplit: true}, "sample_split"},
		{"all", Variants{SwiGLURecompute: true, LogprobTwoPass: true, FlashFwdLdsm: true, ClipScale: true, SampleSplit: true, DecodeVec: true},
			"clip_scale,decode_vec,flash_fwd_ldsm,logprob_twopass,sample_split,swiglu_recompute"},
	} {
		got, err := ParseVariants(c.in)
		if err != nil || got != c.want || got.String() != c.str {
			t.Errorf("ParseVariants(%q) = %+v %q, %v; want %+v %q", c.in, got, got.String(), err, c.want, c.str)
		}
	}
	_, err := ParseVariants("decode_vec,fast")
	if err == nil || !strings.Contains(err.Error(), `"fast"`) || !strings.Contains(err.Error(), VariantsEnv) ||
		!strings.Contains(err.Error(), "clip_scale, decode_vec, flash_fwd_ldsm, logprob_twopass, sample_split, swiglu_recompute, all") {
		t.Errorf("unknown variant: %v", err)
	}
}

// TestParseRetiredVariants: the names of the variants a GPU proof settled
// (promoted to the default kernels, or former defaults measured slower and
// deleted) are errors that say which, alone or in a list, so that a script
// written before cannot time the default against itself unawares.
func TestParseRetiredVariants(t *testing.T) {
	for name, says := range map[string]string{
		"flash_mma": "is the default kernel now", "decode_split": "is the default kernel now", "sample_hist": "is the default kernel now",
		"flash_dkv_heads": "is the default kernel now", "flash_dq_ldsm": "is the default kernel now",
		"flash_simt": "is deleted", "decode_block": "is deleted", "sample_bisect": "is deleted",
		"flash_dkv_group": "is deleted", "flash_dq_stage": "is deleted",
	} {
		for _, in := range []string{name, "decode_vec, " + name} {
			v, err := ParseVariants(in)
			if err == nil || !strings.Contains(err.Error(), `variant "`+name+`" `+says) || !strings.Contains(err.Error(), "H100 proof") ||
				!strings.Contains(err.Error(), VariantsEnv) {
				t.Errorf("ParseVariants(%q) = %v, %v; want the error that %s %s", in, v, err, name, says)
			}
		}
	}
}
