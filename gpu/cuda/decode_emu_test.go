//go:build cudaemu && !cuda

package cuda

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/model"
)

// decodeQwenConfig is a Qwen2-shaped model (biases on q, k, v; GQA groups
// of 2) of L layers for the decode tests below.
func decodeQwenConfig(L int) model.Config {
	return model.Config{Family: "qwen2", V: 97, C: 64, F: 160, L: L, NH: 4, NKV: 2, HD: 16, MaxPos: 64,
		Eps: 1e-6, RopeTheta: 10000, QKVBias: true, BOS: 1, EOS: 2}
}

// decodeGenerate generates n sampled requests (prompts of 3, 7, 11, ...
// tokens, maxTokens each) over 2 slots with c's random weights on be, with
// its fused decode ops on or off, in precision p.
func decodeGenerate(t *testing.T, be *Backend, c model.Config, fused bool, p Precision, n, maxTokens int) []model.Result {
	t.Helper()
	be.SetDecodeFusion(fused)
	defer be.SetDecodeFusion(true)
	be.SetPrecision(p)
	defer be.SetPrecision(FP32)
	r := rand.New(rand.NewPCG(28, 5))
	m := model.NewZero(be, c)
	m.Params.Upload(checkutil.Randn(r, c.NumParams(), 0.3))
	g, err := m.NewGenerator(2, 32)
	if err != nil {
		t.Fatal(err)
	}
	var reqs []model.Request
	for i := range n {
		prompt := make([]int32, 3+4*i)
		for j := range prompt {
			prompt[j] = int32(3 + r.IntN(c.V-3))
		}
		reqs = append(reqs, model.Request{Prompt: prompt, Sample: model.SampleConfig{MaxTokens: maxTokens, IgnoreEOS: true,
			Temperature: 0.9, TopK: 20, TopP: 0.9, Seed: uint64(7 + i)}})
	}
	res, err := g.Generate(reqs)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestGenerateFusedExactEmulator: generation with the fused decode ops
// gives the tokens and log-probs of the separate ops bit for bit on the
// emulator (whose products sum in the same order at any width), in fp32
// and bf16, Qwen2-shaped (biases) and Llama-shaped.
func TestGenerateFusedExactEmulator(t *testing.T) {
	llama := checkutil.GroupsConfig
	for _, c := range []model.Config{decodeQwenConfig(2), llama} {
		for _, p := range []Precision{FP32, BF16} {
			be := openEmulator(t)
			sep := decodeGenerate(t, be, c, false, p, 3, 6)
			fused := decodeGenerate(t, be, c, true, p, 3, 6)
			for i := range sep {
				if !slices.Equal(fused[i].Tokens, sep[i].Tokens) || !slices.Equal(fused[i].Logprobs, sep[i].Logprobs) {
					t.Errorf("%s %s request %d: fused %v %v, separate %v %v", c.Family, p, i,
						fused[i].Tokens, fused[i].Logprobs, sep[i].Tokens, sep[i].Logprobs)
				}
			}
		}
	}
}

// decodeStepLaunches are the kernel launches of one decode step of 2
// sequences (one forward): the launches of a generation of 5 tokens less
// those of 3 tokens (the same prefill), over 2 steps.
func decodeStepLaunches(t *testing.T, c model.Config, fused bool, p Precision) int64 {
	t.Helper()
	var n [2]int64
	for i, k := range []int{3, 5} {
		be := openEmulator(t)
		be.ResetCounters()
		decodeGenerate(t, be, c, fused, p, 2, k)
		n[i] = be.Counters().Launches
	}
	return (n[1] - n[0]) / 2
}

// decodeLayerLaunches are the kernel launches a layer takes in each decode
// step with the fused ops (Qwen2-shaped: q/k/v biases): decode_qkv,
// flash-decoding's attention_cached_split and attention_cached_combine
// (the combine where a token's positions span several chunks, as in these
// decodes of 2 tokens, and below 132 tokens at Qwen2.5-0.5B's 2 KV heads
// on an H100), the fused residual + RMSNorm after attention, swiglu_rows
// and the residual + the next layer's RMSNorm; in bf16 also the
// conversion of the attention output for the o product (the norms and
// swiglu_rows write their outputs' bfloat16 copies). Separate, they were
// 11 and 12 (three add_bias, rope_qk, two scatter_rows and swiglu_forward
// where decode_qkv and swiglu_rows are); the products went from 7 to 4 a
// layer. Qwen2.5-0.5B
// (24 layers), one decode step of few tokens: 269 -> 149 launches in fp32,
// 293 -> 173 in bf16 (TestDecodeLaunchesPerToken logs them; 24 fewer
// without the combine, over one chunk), and 169 -> 97 products.
var decodeLayerLaunches = map[Precision]int64{FP32: 6, BF16: 7}

// TestDecodeLaunchesPerToken: the fused decode's kernel launches per layer
// and decode step are at most decodeLayerLaunches, and those of the
// separate ops exceed it (so that the bound can fail); logs the figure of
// one decode step for Qwen2.5-0.5B's 24 layers.
func TestDecodeLaunchesPerToken(t *testing.T) {
	for _, p := range []Precision{FP32, BF16} {
		var perLayer, fixed [2]int64
		for k, fused := range []bool{false, true} {
			one, two := decodeStepLaunches(t, decodeQwenConfig(1), fused, p), decodeStepLaunches(t, decodeQwenConfig(2), fused, p)
			perLayer[k], fixed[k] = two-one, 2*one-two
		}
		what := fmt.Sprintf("%s decode step", p)
		t.Logf("%s: %d launches a layer + %d fused (%d + %d separate); 24 layers: %d fused, %d separate", what,
			perLayer[1], fixed[1], perLayer[0], fixed[0], fixed[1]+24*perLayer[1], fixed[0]+24*perLayer[0])
		if want := decodeLayerLaunches[p]; perLayer[1] > want {
			t.Errorf("%s: %d launches a layer with the fused ops, want at most %d", what, perLayer[1], want)
		}
		if perLayer[0] <= decodeLayerLaunches[p] {
			t.Errorf("%s: the separate ops take %d launches a layer: the bound cannot fail", what, perLayer[0])
		}
		if fixed[0] != fixed[1] {
			t.Errorf("%s: %d launches outside the layers fused, %d separate", what, fixed[1], fixed[0])
		}
	}
}
