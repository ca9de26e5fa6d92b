package checkutil

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/model"
)

// GroupsConfig is the model of the groups workload: Llama-shaped, one key/value
// head of 16 dimensions (a cache position is 16 floats per layer and tensor).
var GroupsConfig = model.Config{Family: "llama", V: 97, C: 64, F: 128, L: 2, NH: 4, NKV: 1, HD: 16, MaxPos: 64,
	Eps: 1e-5, RopeTheta: 10000, Tied: true, BOS: 1, EOS: 2}

// GroupsSlots and groupsMaxT size the generator of the groups workload: 6
// requests a round over 3 slots.
const GroupsSlots, GroupsMaxT = 3, 40

// GroupsRound is what one round of the groups workload gave.
type GroupsRound struct {
	Results        []model.Result
	Order          []int // requests in the order they finished
	Prefill, Share int   // the generator's PrefillTokens and SharedTokens of the round
}

// GroupsWorkload is the rollout of checkGenerateGroups and
// TestTransferGenerateGroups: two groups of 3 samples (prompts of 18 and 20
// tokens whose first 6, a system prompt, are the same), sampled with
// temperature, top-k and top-p (groupsSample) and a seed per request; the
// first group is there at the start and the second arrives at the second
// step, so that slots are refilled while others decode. Then a tool turn:
// each request's prompt + its response + 3 tool-output tokens, the requests
// whose conversations finished last first, the other three arriving at the
// third step.
type GroupsWorkload struct {
	Init   []float32 // the weights
	Round1 []model.Request
}

// GroupsTokens are n token ids of groupsConfig's vocabulary drawn from r,
// none of its first three (special) ids.
func GroupsTokens(r *rand.Rand, n int) []int32 {
	t := make([]int32, n)
	for j := range t {
		t[j] = int32(3 + r.IntN(GroupsConfig.V-3))
	}
	return t
}

func NewGroupsWorkload() *GroupsWorkload {
	c := GroupsConfig
	r := rand.New(rand.NewPCG(19, 19))
	w := &GroupsWorkload{Init: Randn(r, c.NumParams(), 0.3)}
	tokens := func(n int) []int32 { return GroupsTokens(r, n) }
	system := tokens(6)
	sc := GroupsSample
	for gi, n := range []int{12, 14} {
		prompt := append(slices.Clone(system), tokens(n)...)
		for k := range 3 {
			s := sc[gi]
			s.MaxTokens, s.IgnoreEOS, s.Seed = 4+k, true, uint64(1000+3*gi+k)
			w.Round1 = append(w.Round1, model.Request{Prompt: prompt, Sample: s})
		}
	}
	return w
}

// GroupsSample are the sampling settings of the two groups (and of their
// tool turns): top-k and top-p together, sized so that over this model's
// fairly flat distributions (V 97) each filter binds in each group at some
// draws and not at others. Of a group's 27 draws, leaving top-k out would
// change the token at 9 (first group) and 4 (second), leaving top-p out at
// 5 and 12 (cpu.SampleRow on the CPU run's logits), so a device that
// ignores either filter gives other tokens (the planted sample-no-top-k and
// sample-no-top-p of TestChecksDetectErrors, and
// TestGenerateGroupsSamplingPlantedEmulator).
var GroupsSample = []model.SampleConfig{
	{Temperature: 1, TopK: 15, TopP: 0.4},
	{Temperature: 0.6, TopK: 18, TopP: 0.5},
}

// Turn2 are the tool turn's requests, in the order they are submitted, and
// which first-round request each continues.
func (w *GroupsWorkload) Turn2(first GroupsRound) ([]model.Request, []int) {
	r := rand.New(rand.NewPCG(20, 20))
	var reqs []model.Request
	var of []int
	for _, i := range slices.Backward(first.Order) {
		prev := w.Round1[i]
		prompt := slices.Concat(prev.Prompt, first.Results[i].Tokens)
		for range 3 {
			prompt = append(prompt, int32(3+r.IntN(GroupsConfig.V-3)))
		}
		s := prev.Sample
		s.MaxTokens, s.Seed = 4, 2000+uint64(i)
		reqs, of = append(reqs, model.Request{Prompt: prompt, Sample: s}), append(of, i)
	}
	return reqs, of
}

// Stream runs reqs[:k] at once and the rest as they arrive at step at, on g.
func Stream(g *model.Generator, reqs []model.Request, k, at int) (GroupsRound, error) {
	out := GroupsRound{Results: make([]model.Result, len(reqs))}
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

// Run generates both rounds on g.
func (w *GroupsWorkload) Run(g *model.Generator) ([2]GroupsRound, error) {
	var rounds [2]GroupsRound
	var err error
	if rounds[0], err = Stream(g, w.Round1, 3, 2); err != nil {
		return rounds, fmt.Errorf("round 1: %w", err)
	}
	reqs, of := w.Turn2(rounds[0])
	if rounds[1], err = Stream(g, reqs, 3, 3); err != nil {
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

// PlantNoPrefixSharing turns prefix sharing off in the groups workload's
// generators (a planted defect for the tests; never set otherwise).
var PlantNoPrefixSharing bool

// Generator is a fresh model with the workload's weights on be, and its generator.
func (w *GroupsWorkload) Generator(be gpu.Backend) (*model.Model, *model.Generator, error) {
	m := model.NewZero(be, GroupsConfig)
	m.Params.Upload(w.Init)
	g, err := m.NewGenerator(GroupsSlots, GroupsMaxT)
	if g != nil {
		g.NoPrefixSharing = PlantNoPrefixSharing
	}
	return m, g, err
}
