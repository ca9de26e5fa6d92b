package cudacheck

// The check of the split sampling path (the sample_split variant,
// dev/cuda/sample_split.cuh): on the rows it takes (greedy, unfiltered,
// top-k up to 128 with or without top-p) its tokens must be the CPU
// reference's and the default kernel's, its log-probabilities within
// rounding of the CPU's.

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

// SampleSplit is the sample_split variant as a check turns it on and off,
// and the calls it takes (the others run the default kernel).
type SampleSplit struct {
	On    Variant
	Takes func(params []gpu.SampleParams, V int) bool
}

// CheckSampleSplit runs rows of every kind through SampleTokens with the
// sample_split variant on: V 97 (one slice) and 3000 (one slice, rows with
// ties among the largest and nearly flat ones, as checkSample), V 20000
// (five slices; every shape of sampleHistShape: nearly flat, wider, runs
// of ties where the cuts fall, peaked, a plateau of 3000 equal largest
// logits), 2 draws each, and four rows of the GRPO-like decode's shape (V
// 151936, 38 slices: top-k 50 and top-p 0.95, and temperature alone). On a
// device without variants (the CPU reference's own checks) it samples the
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
// (split.Takes), with the sample_split variant on: the tokens must be the
// CPU reference's (sampleAgrees, log-probs within rounding) and the default
// kernel's. The variant is off after.
func sampleSplitAgrees(b Device, split SampleSplit, V int, params []gpu.SampleParams, logits []float32) error {
	if !split.Takes(params, V) {
		return fmt.Errorf("V=%d: the split path does not take these rows", V)
	}
	M := len(params)
	z := b.Alloc("check logits", M*V)
	defer b.Free(z)
	b.Upload(z, logits)
	want := make([]int32, M)
	b.SampleTokens(want, nil, z, params, M, V)
	got, lp := make([]int32, M), make([]float32, M)
	if err := WithVariant(split.On, func() error {
		b.SampleTokens(got, lp, z, params, M, V)
		return nil
	}); err != nil {
		return err
	}
	for i := range got {
		if got[i] != want[i] {
			return fmt.Errorf("V=%d row %d (%+v): sample_split token %d (log-prob %g), the default kernel's %d; cpu %d",
				V, i, params[i], got[i], lp[i], want[i], cpuToken(logits[i*V:(i+1)*V], params[i]))
		}
	}
	return sampleAgrees(b, V, params, logits)
}

// CheckGenerateSampleSplit: generation whose every row the split path
// takes (temperature alone, top-k, top-k with top-p, greedy), sampled with
// the sample_split variant on for the check's duration: the tokens must be
// the CPU reference's, the log-probs close, as in checkGenerateSampled
// (whose top-p row sends its calls to the default kernel).
func CheckGenerateSampleSplit(b Device, split SampleSplit) error {
	return WithVariant(split.On, func() error {
		return generateSampled(b, 19, 200, []model.SampleConfig{
			{Temperature: 1},
			{Temperature: 0.8, TopK: 10},
			{Temperature: 0.7, TopK: 20, TopP: 0.3},
			{Temperature: 0},
		})
	})
}
