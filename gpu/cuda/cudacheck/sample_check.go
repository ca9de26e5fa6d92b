package cudacheck

// Checks of the sampling family against the CPU reference gpu/cpu
// (sample.go): the same logits and draws must give the same tokens, and
// log-probabilities within rounding.

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
	"github.com/rlhost/rlhost/gpu/model"
)

// checkSample: rows of every kind (greedy; temperature alone; top-k; top-p;
// both; a flat row whose candidates need several thresholds; tied logits
// where order by id matters), 8 draws each, for a vocabulary below the
// block size and one of several chunks per thread.
func checkSample(b Device) error {
	r := rand.New(rand.NewPCG(31, 31))
	kinds := []gpu.SampleParams{
		{Temperature: 0},
		{Temperature: 1},
		{Temperature: 0.7},
		{Temperature: 1.3, TopK: 5},
		{Temperature: 0.9, TopP: 0.8},
		{Temperature: 1, TopK: 40, TopP: 0.95},
		{Temperature: 2, TopP: 0.999},
		{Temperature: 0.5, TopK: 1},
	}
	for _, V := range []int{97, 3000} {
		params, logits := sampleMixedRows(r, kinds, V, 8)
		if err := sampleAgrees(b, V, params, logits); err != nil {
			return err
		}
	}
	return checkSampleFlat(b, r)
}

// sampleMixedRows draws n rows [V] of each kind (U from r, then the row,
// logits of spread 3): kind k's rows plain when k%3 is 0, with ties among
// the largest (every 7th logit the first's) when 1, nearly flat (many
// candidates) when 2.
func sampleMixedRows(r *rand.Rand, kinds []gpu.SampleParams, V, n int) ([]gpu.SampleParams, []float32) {
	var params []gpu.SampleParams
	var logits []float32
	for k, p := range kinds {
		for range n {
			p.U = r.Float64()
			params = append(params, p)
			row := checkutil.Randn(r, V, 3)
			switch k % 3 {
			case 1: // ties: a few logits repeated, among them the largest
				for i := 1; i < V; i += 7 {
					row[i] = row[0]
				}
			case 2: // nearly flat: many candidates
				for i := range row {
					row[i] *= 0.01
				}
			}
			logits = append(logits, row...)
		}
	}
	return params, logits
}

// sampleFlatKinds are the sampling settings of checkSampleFlat (and the
// first of CheckSampleShapes's): top-k below and above the rank limit, top-p
// alone and both.
var sampleFlatKinds = []gpu.SampleParams{
	{Temperature: 1, TopK: 50},
	{Temperature: 1, TopP: 0.95},
	{Temperature: 1, TopK: 50, TopP: 0.95},
	{Temperature: 2, TopK: 5000},
	{Temperature: 1.5, TopK: 3000, TopP: 0.5},
	{Temperature: 0.8, TopP: 0.3},
}

// checkSampleFlat: rows whose filtered candidates are too many to rank
// pairwise (more than SAMPLE_RANK_MAX in kernels/sample.cuh), as a random
// or a hot model gives: nearly flat rows, a wider spread where top-p cuts
// inside the candidates, and rows of few distinct values where the cuts
// fall inside runs of tied logits (order by id), with top-k below and above
// the rank limit, top-p alone and both.
func checkSampleFlat(b Device, r *rand.Rand) error {
	const V = 20000
	var params []gpu.SampleParams
	var logits []float32
	for _, p := range sampleFlatKinds {
		for v := range 3 {
			for range 3 {
				p.U = r.Float64()
				params = append(params, p)
				row := checkutil.Randn(r, V, 1)
				for i := range row {
					switch v {
					case 0: // nearly flat
						row[i] *= 0.01
					case 1: // wider: top-p cuts inside the candidates
						row[i] *= 0.3
					case 2: // 41 distinct values: every level a run of ties
						row[i] = float32(math.Round(float64(row[i])*10)) * 0.01
					}
				}
				logits = append(logits, row...)
			}
		}
	}
	return sampleAgrees(b, V, params, logits)
}

// sampleAgrees samples the rows [M,V] on b and on the CPU reference: the
// same tokens (with and without log-probs), log-probs within rounding.
func sampleAgrees(b Device, V int, params []gpu.SampleParams, logits []float32) error {
	M := len(params)
	wantT, gotT := make([]int32, M), make([]int32, M)
	wantL, gotL := make([]float32, M), make([]float32, M)
	checkutil.Ref.SampleTokens(wantT, wantL, logits, params, M, V)
	z := b.Alloc("check logits", M*V)
	b.Upload(z, logits)
	b.SampleTokens(gotT, gotL, z, params, M, V)
	noLogp := make([]int32, M)
	b.SampleTokens(noLogp, nil, z, params, M, V)
	b.Free(z)
	for i := range wantT {
		if gotT[i] != wantT[i] || noLogp[i] != wantT[i] {
			return fmt.Errorf("V=%d row %d (%+v): token %d on cuda (%d without log-probs), %d on cpu", V, i, params[i], gotT[i], noLogp[i], wantT[i])
		}
	}
	if err := checkutil.Compare(fmt.Sprintf("V=%d sampled logp", V), gotL, wantL, 1e-5); err != nil {
		return err
	}
	return nil
}

// CheckGenerateSampled: generation with temperature, top-k and top-p
// sampled on each backend from the same seeds: the tokens must be equal
// (the request's stream gives both backends the same draws) and their
// log-probabilities close.
func CheckGenerateSampled(b Device) error {
	return generateSampled(b, 18, 100, []model.SampleConfig{
		{Temperature: 1},
		{Temperature: 0.8, TopK: 10},
		{Temperature: 1.2, TopP: 0.9},
		{Temperature: 0.7, TopK: 20, TopP: 0.8},
	})
}

// generateSampled generates with a small random model (V 97, drawn from
// seed) one request a sample config (prompts of 3, 5, 7, ... tokens, 12
// new tokens each, request i seeded by seedBase+i) on the CPU reference and
// on b: the same tokens, log-probabilities close (generateBoth).
func generateSampled(b Device, seed, seedBase uint64, sc []model.SampleConfig) error {
	c := model.Config{Family: "llama", V: 97, C: 64, F: 128, L: 2, NH: 4, NKV: 1, HD: 16, MaxPos: 64,
		Eps: 1e-5, RopeTheta: 10000, Tied: true, BOS: 1, EOS: 2}
	r := rand.New(rand.NewPCG(seed, seed))
	init := checkutil.Randn(r, c.NumParams(), 0.3)
	var reqs []model.Request
	for i, s := range sc {
		prompt := make([]int32, 3+2*i)
		for j := range prompt {
			prompt[j] = int32(r.IntN(c.V))
		}
		s.MaxTokens, s.IgnoreEOS, s.Seed = 12, true, seedBase+uint64(i)
		reqs = append(reqs, model.Request{Prompt: prompt, Sample: s})
	}
	return generateBoth(checkutil.Ref, b, c, init, reqs, 3, "sampled tokens")
}
