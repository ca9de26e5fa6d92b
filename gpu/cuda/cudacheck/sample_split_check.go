package cudacheck

// The checks of the split sampling path (sample_split_max, _sum and _pick,
// kernels/sample.cuh): on the rows it takes (greedy, unfiltered, top-k up to
// 128 with or without top-p) its tokens must be the CPU reference's (and,
// where the device can send the calls to it, sample_tokens_hist's), its
// log-probabilities within rounding of the CPU's.

import (
	"fmt"
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/model"
)

// sampleSplitKinds are the settings of checkSampleSplit: greedy,
// temperature alone, top-k alone (1, 5, 50), top-k with top-p (the
// GRPO-like decode's 50 and 0.95; 128, the largest, with 0.5; 40 with 0.3)
// and a temperature so low that SampleRow's last threshold drops some of
// the top 50 (their e underflow).
var sampleSplitKinds = []gpu.SampleParams{
	{Temperature: 0},
	{Temperature: 1},
	{Temperature: 0.7},
	{Temperature: 0.5, TopK: 1},
	{Temperature: 1.3, TopK: 5},
	{Temperature: 1, TopK: 50},
	{Temperature: 1, TopK: 50, TopP: 0.95},
	{Temperature: 1.5, TopK: 128, TopP: 0.5},
	{Temperature: 0.9, TopK: 40, TopP: 0.3},
	{Temperature: 0.01, TopK: 50},
}

// SampleSplit says which calls the split path takes (cuda.SampleSplits) and,
// where the device has one, a switch that sends every call to
// sample_tokens_hist instead (Hist; nil on a GPU), to compare the two.
type SampleSplit struct {
	Takes func(params []gpu.SampleParams, V int) bool
	Hist  Variant
}

// CheckSampleSplit runs rows of every kind through SampleTokens' split path:
// V 97 (one slice) and 3000 (one slice, rows with ties among the largest and
// nearly flat ones, as checkSample), V 20000 (five slices; every shape of
// sampleHistShape: nearly flat, wider, runs of ties where the cuts fall,
// peaked, a plateau of 3000 equal largest logits), 2 draws each, and four
// rows of the GRPO-like decode's shape (V 151936, 38 slices: top-k 50 and
// top-p 0.95, and temperature alone). On the CPU reference it samples the
// same rows as SampleTokens does there.
func CheckSampleSplit(b Device, split SampleSplit) error {
	r := rand.New(rand.NewPCG(29, 29))
	for _, V := range []int{97, 3000} {
		var kinds []gpu.SampleParams // top-k 128 with top-p is top-p alone at V 97: left out there
		for _, p := range sampleSplitKinds {
			if split.Takes([]gpu.SampleParams{p}, V) {
				kinds = append(kinds, p)
			}
		}
		params, logits := sampleMixedRows(r, kinds, V, 4)
		if err := sampleSplitAgrees(b, split, V, params, logits); err != nil {
			return err
		}
	}
	const V = 20000
	params, logits := sampleShapedRows(r, sampleSplitKinds, V)
	if err := sampleSplitAgrees(b, split, V, params, logits); err != nil {
		return err
	}
	const big = 151936
	params, logits = sampleFlatRows(r, []gpu.SampleParams{
		{Temperature: 1, TopK: 50, TopP: 0.95}, {Temperature: 1, TopK: 50, TopP: 0.95}, {Temperature: 1}, {Temperature: 1}}, big)
	return sampleSplitAgrees(b, split, big, params, logits)
}

// sampleSplitAgrees samples the rows [M,V], which the split path must take
// (split.Takes): the tokens must be the CPU reference's (sampleAgrees,
// log-probs within rounding) and, with split.Hist, sample_tokens_hist's.
func sampleSplitAgrees(b Device, split SampleSplit, V int, params []gpu.SampleParams, logits []float32) error {
	if !split.Takes(params, V) {
		return fmt.Errorf("V=%d: the split path does not take these rows", V)
	}
	if split.Hist != nil {
		M := len(params)
		z := b.Alloc("check logits", M*V)
		defer b.Free(z)
		b.Upload(z, logits)
		got, lp := make([]int32, M), make([]float32, M)
		b.SampleTokens(got, lp, z, params, M, V)
		want := make([]int32, M)
		if err := WithVariant(split.Hist, func() error {
			b.SampleTokens(want, nil, z, params, M, V)
			return nil
		}); err != nil {
			return err
		}
		for i := range got {
			if got[i] != want[i] {
				return fmt.Errorf("V=%d row %d (%+v): split path token %d (log-prob %g), sample_tokens_hist's %d; cpu %d",
					V, i, params[i], got[i], lp[i], want[i], cpuToken(logits[i*V:(i+1)*V], params[i]))
			}
		}
	}
	return sampleAgrees(b, V, params, logits)
}

// CheckGenerateSampleSplit: generation whose every row the split path
// takes (temperature alone, top-k, top-k with top-p, greedy): the tokens
// must be the CPU reference's, the log-probs close, as in
// checkGenerateSampled (whose top-p row sends its calls to
// sample_tokens_hist).
func CheckGenerateSampleSplit(b Device) error {
	return generateSampled(b, 19, 200, []model.SampleConfig{
		{Temperature: 1},
		{Temperature: 0.8, TopK: 10},
		{Temperature: 0.7, TopK: 20, TopP: 0.3},
		{Temperature: 0},
	})
}
