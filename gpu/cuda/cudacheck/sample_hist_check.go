package cudacheck

// The check of the two sampling kernels (kernels/sample.cuh): the default
// sample_tokens_hist (radix select) and sample_tokens (bisection, the
// sample_bisect variant, Variants.SampleBisect) must give the CPU
// reference's tokens, and each other's tokens and log-probabilities bit
// for bit, so that a run samples the same whichever kernel ran.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// sampleHistKinds are the sampling settings of checkSampleBisect:
// checkSampleFlat's (top-k alone below and above the rank limit, 1024
// candidates; top-p alone; both: the GRPO-like decode's top-k 50, top-p
// 0.95, and a top-k beyond the rank limit, where top-p and the draw are cut
// by levels too), then top-k 1500 alone and greedy.
var sampleHistKinds = slices.Concat(sampleFlatKinds, []gpu.SampleParams{
	{Temperature: 1, TopK: 1500},
	{Temperature: 0},
})

// sampleHistShape fills a row of the kind the check needs: 0 nearly flat
// (many near-equal logits, a random model's row), 1 a wider spread (top-p
// cuts inside the candidates), 2 few distinct values (41: every cut falls
// inside a run of ties, ordered by id), 3 peaked (few candidates: the
// ranked path), 4 a plateau of 3000 equal largest logits above a flat rest
// (the top-k and top-p cuts and the draw inside one level of ties).
func sampleHistShape(r *rand.Rand, row []float32, shape int) {
	for i := range row {
		z := r.NormFloat64()
		switch shape {
		case 0:
			row[i] = float32(z * 0.01)
		case 1:
			row[i] = float32(z * 0.3)
		case 2:
			row[i] = float32(math.Round(z*10)) * 0.01
		case 3:
			row[i] = float32(z * 3)
		case 4:
			row[i] = float32(z*0.01) - 1
		}
	}
	if shape == 4 {
		for _, i := range r.Perm(len(row))[:3000] {
			row[i] = 0.5
		}
	}
}

const sampleHistShapes = 5

// CheckSampleBisect runs rows of every kind and shape (V 20000, 2 draws
// each) and four rows of the GRPO-like decode's shape (V 151936, top-k 50,
// top-p 0.95, nearly flat) through SampleTokens with the default kernel
// and with the sample_bisect variant on: the tokens must be the CPU
// reference's and, on a device with variants, the two kernels' tokens and
// log-probabilities the same, bit for bit. The variants are restored
// after.
func CheckSampleBisect(b Device) error {
	r := rand.New(rand.NewPCG(27, 27))
	const V = 20000
	params, logits := sampleShapedRows(r, sampleHistKinds, V)
	if err := sampleKernelsAgree(b, V, params, logits); err != nil {
		return err
	}
	const big = 151936
	grpo := gpu.SampleParams{Temperature: 1, TopK: 50, TopP: 0.95}
	params, logits = sampleFlatRows(r, []gpu.SampleParams{grpo, grpo, grpo, grpo}, big)
	return sampleKernelsAgree(b, big, params, logits)
}

// sampleShapedRows draws rows [M,V] of every kind and every shape of
// sampleHistShape, 2 draws each (U from r, then the row).
func sampleShapedRows(r *rand.Rand, kinds []gpu.SampleParams, V int) ([]gpu.SampleParams, []float32) {
	var params []gpu.SampleParams
	var logits []float32
	row := make([]float32, V)
	for _, p := range kinds {
		for shape := range sampleHistShapes {
			for range 2 {
				p.U = r.Float64()
				params = append(params, p)
				sampleHistShape(r, row, shape)
				logits = append(logits, row...)
			}
		}
	}
	return params, logits
}

// sampleFlatRows draws a nearly flat row of V logits for each of kinds (U
// from r, then the row), as a random model's row of the GRPO-like decode.
func sampleFlatRows(r *rand.Rand, kinds []gpu.SampleParams, V int) ([]gpu.SampleParams, []float32) {
	params, logits := make([]gpu.SampleParams, 0, len(kinds)), make([]float32, 0, len(kinds)*V)
	row := make([]float32, V)
	for _, p := range kinds {
		p.U = r.Float64()
		params = append(params, p)
		sampleHistShape(r, row, 0)
		logits = append(logits, row...)
	}
	return params, logits
}

// sampleKernelsAgree samples the rows [M,V] with the radix select and (on
// a device with variants) with the bisection: the radix select's tokens
// must be the CPU reference's (sampleAgrees), and the bisection's tokens
// and log-probs the radix select's exactly.
func sampleKernelsAgree(b Device, V int, params []gpu.SampleParams, logits []float32) error {
	vd, ok := b.(variantDevice)
	if !ok {
		return sampleAgrees(b, V, params, logits)
	}
	was := vd.Variants()
	defer vd.SetVariants(was)
	hist, bisect := was, was
	hist.SampleBisect, bisect.SampleBisect = false, true
	M := len(params)
	z := b.Alloc("check logits", M*V)
	defer b.Free(z)
	b.Upload(z, logits)
	var tok [2][]int32
	var lp [2][]float32
	for i, v := range []cuda.Variants{hist, bisect} {
		vd.SetVariants(v)
		tok[i], lp[i] = make([]int32, M), make([]float32, M)
		b.SampleTokens(tok[i], lp[i], z, params, M, V)
	}
	for i := range tok[0] {
		if tok[1][i] != tok[0][i] || math.Float32bits(lp[1][i]) != math.Float32bits(lp[0][i]) {
			return fmt.Errorf("V=%d row %d (%+v): sample_hist token %d (log-prob %g), sample_bisect %d (%g); cpu %d",
				V, i, params[i], tok[0][i], lp[0][i], tok[1][i], lp[1][i], cpuToken(logits[i*V:(i+1)*V], params[i]))
		}
	}
	vd.SetVariants(hist)
	return sampleAgrees(b, V, params, logits) // the radix select's tokens (the bisection's are the same)
}

// cpuToken is the CPU reference's token of one row.
func cpuToken(row []float32, p gpu.SampleParams) int32 {
	t := make([]int32, 1)
	checkutil.Ref.SampleTokens(t, nil, row, []gpu.SampleParams{p}, 1, len(row))
	return t[0]
}
