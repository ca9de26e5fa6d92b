//go:build cudaemu && !cuda

package rollout

import (
	"context"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/weights"
)

// TestModelPolicyToolTurnsOnDevice: the built-in rollout policy takes the same path on the
// CUDA backend (its kernels on the emulator) as on the CPU for a GRPO group with a tool
// turn, as the tool agent calls it (each turn's prompt is the conversation so far: prompt,
// responses, observations): the same tokens, log-probs within 1e-4 and the same prompt
// tokens prefilled and shared (the group's samples and the tool turns reuse the cache);
// only the sampled ids and their log-probs come down (8 bytes per token, no logits).
func TestModelPolicyToolTurnsOnDevice(t *testing.T) {
	ck, err := weights.Load(filepath.Join("..", "..", "gpu", "model", "testdata", "tiny-llama"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	prompt := []int{1, 17, 33, 45, 9, 81, 12, 40, 7, 66, 23, 5}
	obs := []int{90, 91, 92, 93}
	type run struct {
		gens              []Generation
		prefilled, shared [2]int
	}
	emu := cuda.OpenEmulator()
	defer emu.Close()
	var runs [2]run
	for k, be := range []gpu.Backend{cpu.New(), emu} {
		m, err := model.New(be, ck)
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewModelPolicy(m, 2, 64)
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		emu.ResetCounters()
		r := &runs[k]
		var convs [][]int
		for i := range 3 { // a group: 3 samples of one prompt
			g, err := p.Generate(ctx, prompt, SamplingParams{MaxTokens: 5, Temperature: 1, TopK: 20, Seed: uint64(10 + i)})
			if err != nil {
				t.Fatal(err)
			}
			r.gens = append(r.gens, g)
			convs = append(convs, append(slices.Clone(prompt), g.Tokens...))
		}
		r.prefilled[0], r.shared[0] = p.PrefixStats()
		for i := 2; i >= 0; i-- { // the tool turns, the last conversation first
			g, err := p.Generate(ctx, append(convs[i], obs...), SamplingParams{MaxTokens: 4, Temperature: 0.8, TopP: 0.9, Seed: uint64(20 + i)})
			if err != nil {
				t.Fatal(err)
			}
			r.gens = append(r.gens, g)
		}
		r.prefilled[1], r.shared[1] = p.PrefixStats()
		if k == 1 {
			c := emu.Counters()
			sampled := 0
			for _, g := range r.gens {
				sampled += len(g.Tokens)
			}
			t.Logf("on the device: %d tokens sampled: %v", sampled, c)
			if c.DeviceToHost != int64(8*sampled) {
				t.Errorf("%d bytes came down for %d sampled tokens, want 8 a token (ids and log-probs, no logits)", c.DeviceToHost, sampled)
			}
		}
	}
	want, got := runs[0], runs[1]
	t.Logf("prompt tokens prefilled/shared after the group %d/%d, after the tool turns %d/%d", want.prefilled[0], want.shared[0], want.prefilled[1], want.shared[1])
	for i := range want.gens {
		if !slices.Equal(got.gens[i].Tokens, want.gens[i].Tokens) {
			t.Fatalf("call %d: tokens %v on cuda, %v on cpu", i, got.gens[i].Tokens, want.gens[i].Tokens)
		}
		for j, w := range want.gens[i].Logprobs {
			if d := math.Abs(float64(got.gens[i].Logprobs[j] - w)); d > 1e-4*max(1, math.Abs(float64(w))) {
				t.Fatalf("call %d token %d: log-prob %g on cuda, %g on cpu", i, j, got.gens[i].Logprobs[j], w)
			}
		}
	}
	if got.prefilled != want.prefilled || got.shared != want.shared {
		t.Errorf("prompt tokens prefilled %v and shared %v on cuda, %v and %v on cpu", got.prefilled, got.shared, want.prefilled, want.shared)
	}
	if want.shared[0] == 0 || want.shared[1] <= want.shared[0] {
		t.Errorf("prompt tokens shared: %d after the group, %d after the tool turns: the group or the tool turns did not reuse the cache", want.shared[0], want.shared[1])
	}
}
