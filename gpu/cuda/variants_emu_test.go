//go:build cudaemu

package cuda_test

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/cudacheck"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// TestChecksWithAllVariants runs every check with every kernel variant on
// (the kernels the defaults replaced), as `RLHOST_CUDA_VARIANTS=all rlhost
// selftest --device cuda` does on a GPU (scripts/gpu/proof.sh): the checks
// written for the default kernels hold with the variants too, and a check
// that switches variants for its duration leaves them as it found them.
func TestChecksWithAllVariants(t *testing.T) {
	be := openEmulator(t)
	all, err := cuda.ParseVariants("all")
	if err != nil {
		t.Fatal(err)
	}
	be.SetVariants(all)
	for _, c := range cudacheck.Checks {
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Do(be); err != nil {
				t.Fatal(err)
			}
			if got := be.Variants(); got != all {
				t.Fatalf("the check left the variants at %v", got)
			}
		})
	}
}

// TestVariantKernels: the kernels each selection launches, from the
// device's profile: by default the FlashMMA attention with bf16 products
// (its backward for HD <= 64 the per-query-head dK/dV with its reduction
// and dQ with ldmatrix; the SIMT kernels in fp32), flash-decoding and the
// radix-select sampling; with decode_vec the split kernel's _vec build;
// with flash_fwd_ldsm forward_ldsm_mma64 in place of forward_mma64, where
// the tensor-core kernels run, nothing else; with sample_split, whose path
// does not take a row of top-p alone, the default sampling kernel.
func TestVariantKernels(t *testing.T) {
	be := openEmulator(t)
	if err := be.EnableProfile(); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 3))
	// the fused attention over two sequences, HD 64 (the Qwen2.5-0.5B heads)
	lengths := []int{70, 9}
	const NH, NKV, HD = 2, 1, 64
	cu, maxT, S, N, q, k, v := cudacheck.FlashOperands(r, lengths, NH, NKV, HD)
	out, lse, dout := make([]float32, len(q)), make([]float32, N*NH), checkutil.Randn(r, len(q), 1)
	dq, dk, dv := make([]float32, len(q)), make([]float32, len(k)), make([]float32, len(v))
	attention := func() {
		be.AttentionVarlenForward(out, lse, q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
		be.AttentionVarlenBackward(dq, dk, dv, dout, out, lse, q, k, v, cu, S, N, maxT, NH, NKV, HD, 0)
	}
	// a decode's attention over a long cache (many chunks) and flat rows to sample
	c := checkutil.DecodeSplitCases[0]
	kc, vc := checkutil.Randn(r, c.S*c.MaxT*c.NKV*c.HD, 1), checkutil.Randn(r, c.S*c.MaxT*c.NKV*c.HD, 1)
	cq, cout := checkutil.Randn(r, len(c.Pos)*c.NH*c.HD, 1), make([]float32, len(c.Pos)*c.NH*c.HD)
	const M, V = 2, 3000
	logits := checkutil.Randn(r, M*V, 0.01)
	params := []gpu.SampleParams{{Temperature: 1, TopK: 50, TopP: 0.95, U: 0.3}, {Temperature: 1, TopP: 0.9, U: 0.7}}
	tokens := make([]int32, M)
	decode := func() {
		be.AttentionCachedForward(cout, cq, kc, vc, c.Slot, c.Pos, len(c.Pos), c.NH, c.NKV, c.HD, c.MaxT, 0)
		be.SampleTokens(tokens, nil, logits, params, M, V)
	}
	mma := []string{"flash_attention_forward_mma64", "flash_attention_backward_dkv_heads_mma64",
		"flash_attention_backward_dkv_reduce", "flash_attention_backward_dq_ldsm_mma64"}
	simt := []string{"flash_attention_forward", "flash_attention_backward_dkv", "flash_attention_backward_dq"}
	split := []string{"attention_cached_split", "attention_cached_combine", "sample_tokens_hist"}
	for _, tc := range []struct {
		variants string
		prec     cuda.Precision
		want     []string // every kernel of the step
	}{
		{"", cuda.BF16, slices.Concat(mma, split)},
		{"", cuda.FP32, slices.Concat(simt, split)},
		{"decode_vec", cuda.BF16, slices.Concat(mma, []string{"attention_cached_split_vec", "attention_cached_combine", "sample_tokens_hist"})},
		// a call with a row of top-p alone runs the default kernel
		{"sample_split", cuda.BF16, slices.Concat(mma, split)},
		{"flash_fwd_ldsm", cuda.BF16, slices.Concat([]string{"flash_attention_forward_ldsm_mma64",
			"flash_attention_backward_dkv_heads_mma64", "flash_attention_backward_dkv_reduce",
			"flash_attention_backward_dq_ldsm_mma64"}, split)},
		{"flash_fwd_ldsm", cuda.FP32, slices.Concat(simt, split)},
		{"all", cuda.BF16, slices.Concat([]string{"flash_attention_forward_ldsm_mma64",
			"flash_attention_backward_dkv_heads_mma64", "flash_attention_backward_dkv_reduce",
			"flash_attention_backward_dq_ldsm_mma64"}, []string{"attention_cached_split_vec", "attention_cached_combine", "sample_tokens_hist"})},
	} {
		v, err := cuda.ParseVariants(tc.variants)
		if err != nil {
			t.Fatal(err)
		}
		be.SetVariants(v)
		be.SetPrecision(tc.prec)
		be.ResetProfile()
		attention()
		decode()
		p, err := be.Profile()
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range p.Entries {
			if e.Kind == "kernel" && e.Op != "flash_attention_backward_dot" {
				got = append(got, e.Op)
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(got, want) {
			t.Errorf("variants %q, %s products: kernels %v, want %v", v, tc.prec, got, want)
		}
	}
}
