package cuda

// The generation check of a GRPO rollout with a tool turn: groups of samples
// of a prompt, more requests than slots (continuous batching through
// model.Generator.Stream with a feed), prefix sharing within a group, and a
// second round whose prompts extend the first round's conversations.

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/model"
)

// groupsConfig is the model of the groups workload: Llama-shaped, one key/value
// head of 16 dimensions (a cache position is 16 floats per layer and tensor).
var groupsConfig = model.Config{Family: "llama", V: 97, C: 64, F: 128, L: 2, NH: 4, NKV: 1, HD: 16, MaxPos: 64,
	Eps: 1e-5, RopeTheta: 10000, Tied: true, BOS: 1, EOS: 2}

// groupsSlots and groupsMaxT size the generator of the groups workload: 6
// requests a round over 3 slots.
const groupsSlots, groupsMaxT = 3, 40

// groupsRound is what one round of the groups workload gave.
type groupsRound struct {
	Results        []model.Result
	Order          []int // requests in the order they finished
	Prefill, Share int   // the generator's PrefillTokens and SharedTokens of the round
}

// groupsWorkload is the rollout of checkGenerateGroups and
// TestTransferGenerateGroups: two groups of 3 samples (prompts of 18 and 20
// tokens whose first 6, a system prompt, are the same), sampled with
// temperature, top-k and top-p (groupsSample) and a seed per request; the
// first group is there at the start and the second arrives at the second
// step, so that slots are refilled while others decode. Then a tool turn:
// each request's prompt + its response + 3 tool-output tokens, the requests
// whose conversations finished last first, the other three arriving at the
// third step.
type groupsWorkload struct {
	init   []float32 // the weights
	round1 []model.Request
}

// groupsTokens are n token ids of groupsConfig's vocabulary drawn from r,
// none of its first three (special) ids.
func groupsTokens(r *rand.Rand, n int) []int32 {
	t := make([]int32, n)
	for j := range t {
		t[j] = int32(3 + r.IntN(groupsConfig.V-3))
	}
	return t
}

func newGroupsWorkload() *groupsWorkload {
	c := groupsConfig
	r := rand.New(rand.NewPCG(19, 19))
	w := &groupsWorkload{init: randn(r, c.NumParams(), 0.3)}
	tokens := func(n int) []int32 { return groupsTokens(r, n) }
	system := tokens(6)
	sc := groupsSample
	for gi, n := range []int{12, 14} {
		prompt := append(slices.Clone(system), tokens(n)...)
		for k := range 3 {
			s := sc[gi]
			s.MaxTokens, s.IgnoreEOS, s.Seed = 4+k, true, uint64(1000+3*gi+k)
			w.round1 = append(w.round1, model.Request{Prompt: prompt, Sample: s})
		}
	}
	return w
}

// groupsSample are the sampling settings of the two groups (and of their
// tool turns): top-k and top-p together, sized so that over this model's
// fairly flat distributions (V 97) each filter binds in each group at some
// draws and not at others. Of a group's 27 draws, leaving top-k out would
// change the token at 9 (first group) and 4 (second), leaving top-p out at
// 5 and 12 (cpu.SampleRow on the CPU run's logits), so a device that
// ignores either filter gives other tokens (the planted sample-no-top-k and
// sample-no-top-p of TestChecksDetectErrors, and
// TestGenerateGroupsSamplingPlantedEmulator).
var groupsSample = []model.SampleConfig{
	{Temperature: 1, TopK: 15, TopP: 0.4},
	{Temperature: 0.6, TopK: 18, TopP: 0.5},
}

// turn2 are the tool turn's requests, in the order they are submitted, and
// which first-round request each continues.
func (w *groupsWorkload) turn2(first groupsRound) ([]model.Request, []int) {
	r := rand.New(rand.NewPCG(20, 20))
	var reqs []model.Request
	var of []int
	for _, i := range slices.Backward(first.Order) {
		prev := w.round1[i]
		prompt := slices.Concat(prev.Prompt, first.Results[i].Tokens)
		for range 3 {
			prompt = append(prompt, int32(3+r.IntN(groupsConfig.V-3)))
		}
		s := prev.Sample
		s.MaxTokens, s.Seed = 4, 2000+uint64(i)
		reqs, of = append(reqs, model.Request{Prompt: prompt, Sample: s}), append(of, i)
	}
	return reqs, of
}

// stream runs reqs[:k] at once and the rest as they arrive at step at, on g.
func stream(g *model.Generator, reqs []model.Request, k, at int) (groupsRound, error) {
	out := groupsRound{Results: make([]model.Result, len(reqs))}
	p0, s0 := g.PrefillTokens, g.SharedTokens
	step := 0
	feed := func() []model.Request {
		if step++; step == at {
			return reqs[k:]
		}
		return nil
	}
	var failed error
	err := g.Stream(reqs[:k], feed, func(i int, res model.Result, err error) {
		if err != nil && failed == nil {
			failed = fmt.Errorf("request %d: %w", i, err)
		}
		out.Results[i] = res
		out.Order = append(out.Order, i)
	})
	if err == nil {
		err = failed
	}
	out.Prefill, out.Share = g.PrefillTokens-p0, g.SharedTokens-s0
	return out, err
}

// run generates both rounds on g.
func (w *groupsWorkload) run(g *model.Generator) ([2]groupsRound, error) {
	var rounds [2]groupsRound
	var err error
	if rounds[0], err = stream(g, w.round1, 3, 2); err != nil {
		return rounds, fmt.Errorf("round 1: %w", err)
	}
	reqs, of := w.turn2(rounds[0])
	if rounds[1], err = stream(g, reqs, 3, 3); err != nil {
		return rounds, fmt.Errorf("round 2: %w", err)
	}
	// number the tool turn's results by the first-round request they continue
	r := rounds[1]
	rounds[1].Results = make([]model.Result, len(r.Results))
	rounds[1].Order = nil
	for i, res := range r.Results {
		rounds[1].Results[of[i]] = res
	}
	for _, i := range r.Order {
		rounds[1].Order = append(rounds[1].Order, of[i])
	}
	return rounds, nil
}

// plantNoPrefixSharing turns prefix sharing off in the groups workload's
// generators (a planted defect for the tests; never set otherwise).
var plantNoPrefixSharing bool

// generator is a fresh model with the workload's weights on be, and its generator.
func (w *groupsWorkload) generator(be gpu.Backend) (*model.Model, *model.Generator, error) {
	m := model.NewZero(be, groupsConfig)
	m.Params.Upload(w.init)
	g, err := m.NewGenerator(groupsSlots, groupsMaxT)
	if g != nil {
		g.NoPrefixSharing = plantNoPrefixSharing
	}
	return m, g, err
}

// checkGenerateGroups: a GRPO rollout with a tool turn (groupsWorkload) on the
// device and on the CPU must give the same tokens, log-probs within 1e-4,
// and the same prompt tokens prefilled and shared in each round, with
// prompt tokens shared in both (the samples of a group copy their prompt's
// keys and values; a tool turn reuses its conversation's cache), so that
// the check fails if prefix sharing silently stops or copies the wrong
// keys and values.
func checkGenerateGroups(b Device) error {
	w := newGroupsWorkload()
	var rounds [2][2]groupsRound
	for k, be := range []gpu.Backend{ref, b} {
		_, g, err := w.generator(be)
		if err != nil {
			return err
		}
		if rounds[k], err = w.run(g); err != nil {
			return fmt.Errorf("generate on %s: %w", be.Name(), err)
		}
	}
	for n := range 2 {
		want, got := rounds[0][n], rounds[1][n]
		for i := range want.Results {
			if !slices.Equal(got.Results[i].Tokens, want.Results[i].Tokens) {
				return fmt.Errorf("round %d request %d: tokens %v on cuda, %v on cpu", n+1, i, got.Results[i].Tokens, want.Results[i].Tokens)
			}
			if err := compare(fmt.Sprintf("round %d request %d logprobs", n+1, i), got.Results[i].Logprobs, want.Results[i].Logprobs, 1e-4); err != nil {
				return err
			}
		}
		if got.Prefill != want.Prefill || got.Share != want.Share {
			return fmt.Errorf("round %d: %d prompt tokens prefilled and %d shared on cuda, %d and %d on cpu", n+1, got.Prefill, got.Share, want.Prefill, want.Share)
		}
		if want.Share == 0 {
			return fmt.Errorf("round %d: no prompt token shared (%d prefilled) on cuda and cpu: prefix sharing is off", n+1, want.Prefill)
		}
	}
	return nil
}
