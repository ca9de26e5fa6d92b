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
		{"flash_mma", Variants{FlashMMA: true}, "flash_mma"},
		{" decode_split , sample_hist", Variants{DecodeSplit: true, SampleHist: true}, "decode_split,sample_hist"},
		{"all", Variants{FlashMMA: true, DecodeSplit: true, SampleHist: true}, "decode_split,flash_mma,sample_hist"},
	} {
		got, err := ParseVariants(c.in)
		if err != nil || got != c.want || got.String() != c.str {
			t.Errorf("ParseVariants(%q) = %+v %q, %v; want %+v %q", c.in, got, got.String(), err, c.want, c.str)
		}
	}
	_, err := ParseVariants("flash_mma,fast")
	if err == nil || !strings.Contains(err.Error(), `"fast"`) || !strings.Contains(err.Error(), VariantsEnv) || !strings.Contains(err.Error(), "decode_split") {
		t.Errorf("unknown variant: %v", err)
	}
}
