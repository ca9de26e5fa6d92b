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
		{"flash_simt", Variants{FlashSIMT: true}, "flash_simt"},
		{" decode_block , sample_bisect", Variants{DecodeBlock: true, SampleBisect: true}, "decode_block,sample_bisect"},
		{"flash_dkv_group", Variants{FlashDKVGroup: true}, "flash_dkv_group"},
		{"flash_dq_stage,flash_dkv_group", Variants{FlashDKVGroup: true, FlashDQStage: true}, "flash_dkv_group,flash_dq_stage"},
		{"swiglu_recompute", Variants{SwiGLURecompute: true}, "swiglu_recompute"},
		{"logprob_twopass", Variants{LogprobTwoPass: true}, "logprob_twopass"},
		{"flash_fwd_ldsm", Variants{FlashFwdLdsm: true}, "flash_fwd_ldsm"},
		{"clip_scale", Variants{ClipScale: true}, "clip_scale"},
		{"decode_vec", Variants{DecodeVec: true}, "decode_vec"},
		{"sample_split", Variants{SampleSplit: true}, "sample_split"},
		{"all", Variants{FlashSIMT: true, DecodeBlock: true, SampleBisect: true, FlashDKVGroup: true, FlashDQStage: true,
			SwiGLURecompute: true, LogprobTwoPass: true, FlashFwdLdsm: true, ClipScale: true, SampleSplit: true, DecodeVec: true},
			"clip_scale,decode_block,decode_vec,flash_dkv_group,flash_dq_stage,flash_fwd_ldsm,flash_simt,logprob_twopass,sample_bisect,sample_split,swiglu_recompute"},
	} {
		got, err := ParseVariants(c.in)
		if err != nil || got != c.want || got.String() != c.str {
			t.Errorf("ParseVariants(%q) = %+v %q, %v; want %+v %q", c.in, got, got.String(), err, c.want, c.str)
		}
	}
	_, err := ParseVariants("flash_simt,fast")
	if err == nil || !strings.Contains(err.Error(), `"fast"`) || !strings.Contains(err.Error(), VariantsEnv) ||
		!strings.Contains(err.Error(), "clip_scale, decode_block, decode_vec, flash_dkv_group, flash_dq_stage, flash_fwd_ldsm, flash_simt, logprob_twopass, sample_bisect, sample_split, swiglu_recompute, all") {
		t.Errorf("unknown variant: %v", err)
	}
}

// TestParsePromotedVariants: the names of the variants that became the
// default kernels are errors that say so and name the variant of the
// kernel each replaced, alone or in a list, so that a script written
// before cannot time the default against itself unawares.
func TestParsePromotedVariants(t *testing.T) {
	for old, former := range map[string]string{"flash_mma": "flash_simt", "decode_split": "decode_block", "sample_hist": "sample_bisect",
		"flash_dkv_heads": "flash_dkv_group", "flash_dq_ldsm": "flash_dq_stage"} {
		for _, in := range []string{old, "decode_block, " + old} {
			v, err := ParseVariants(in)
			if err == nil || !strings.Contains(err.Error(), `"`+old+`" is the default kernel now`) ||
				!strings.Contains(err.Error(), `"`+former+`" selects the kernel it replaced`) || !strings.Contains(err.Error(), VariantsEnv) {
				t.Errorf("ParseVariants(%q) = %v, %v; want the error that %s is the default now and %s the former kernel", in, v, err, old, former)
			}
		}
	}
}
