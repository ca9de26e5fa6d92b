package cuda

import (
	"testing"

	"github.com/rlhost/rlhost/gpu"
)

// TestSplitPlan: the slices the split path cuts a call's rows into, and
// the rows it leaves to the default kernel.
func TestSplitPlan(t *testing.T) {
	greedy, plain := gpu.SampleParams{}, gpu.SampleParams{Temperature: 1}
	k50p := gpu.SampleParams{Temperature: 1, TopK: 50, TopP: 0.95}
	k128 := gpu.SampleParams{Temperature: 1, TopK: 128}
	for _, c := range []struct {
		params    []gpu.SampleParams
		V         int
		S, SL, KC int
		ok        bool
		what      string
	}{
		{[]gpu.SampleParams{greedy, plain}, 151936, 38, 3999, 0, true, "greedy and unfiltered: slices of 4096 at most"},
		{[]gpu.SampleParams{plain, k50p}, 151936, 38, 3999, 50, true, "top-k 50: 38 x 50 candidates fit"},
		{[]gpu.SampleParams{k128, greedy}, 151936, 32, 4748, 128, true, "top-k 128: 32 slices, 4096 candidates"},
		{[]gpu.SampleParams{plain}, 97, 1, 97, 0, true, "one slice"},
		{[]gpu.SampleParams{{Temperature: 1, TopK: 97}}, 97, 1, 97, 0, true, "top-k >= V is unfiltered"},
		{[]gpu.SampleParams{plain, {Temperature: 1, TopP: 0.9}}, 151936, 0, 0, 0, false, "top-p alone"},
		{[]gpu.SampleParams{{Temperature: 1, TopK: 129}}, 151936, 0, 0, 0, false, "top-k above 128"},
		{[]gpu.SampleParams{{Temperature: 1, TopK: 200, TopP: 0.5}}, 151936, 0, 0, 0, false, "top-k above 128 with top-p"},
		{[]gpu.SampleParams{k128}, 300000, 0, 0, 0, false, "slices over 8192 ids"},
		{[]gpu.SampleParams{{Temperature: 0, TopP: 0.5}}, 151936, 38, 3999, 0, true, "greedy ignores top-p"},
	} {
		S, SL, KC, ok := splitPlan(c.params, c.V)
		if ok != c.ok || (ok && (S != c.S || SL != c.SL || KC != c.KC)) {
			t.Errorf("%s: splitPlan = %d %d %d %v, want %d %d %d %v", c.what, S, SL, KC, ok, c.S, c.SL, c.KC, c.ok)
		}
		if ok && ((S-1)*SL >= c.V || S*SL < c.V || S*max(KC, 1) > ssCandMax || SL > ssSliceMax) {
			t.Errorf("%s: %d slices of %d ids, %d candidates each, for V %d", c.what, S, SL, KC, c.V)
		}
	}
}
