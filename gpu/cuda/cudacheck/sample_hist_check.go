package cudacheck

// The check of sampling (kernels/sample.cuh) over rows of every kind and
// shape: it must give the CPU reference's tokens. The rows of V 20000 run
// sample_tokens_hist (radix select; their top-k 1500 rows send the calls
// there), the GRPO-like rows of V 151936 the split path. (On the emulator,
// TestSampleBisectEmulator runs every row through sample_tokens_hist and
// through the bisection in its place and compares the two bit for bit.)

import (
	"math"
	"math/rand/v2"
	"slices"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// sampleHistKinds are the sampling settings of CheckSampleShapes:
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

// CheckSampleShapes runs rows of every kind and shape (V 20000, 2 draws
// each: sample_tokens_hist) and four rows of the GRPO-like decode's shape
// (V 151936, top-k 50, top-p 0.95, nearly flat: the split path) through
// SampleTokens: the tokens must be the CPU reference's.
func CheckSampleShapes(b Device) error {
	r := rand.New(rand.NewPCG(27, 27))
	const V = 20000
	params, logits := SampleShapesRows(r, V)
	if err := sampleAgrees(b, V, params, logits); err != nil {
		return err
	}
	const big = 151936
	params, logits = SampleShapesGRPO(r, big)
	return sampleAgrees(b, big, params, logits)
}

// SampleShapesRows are CheckSampleShapes' rows of every kind and shape.
func SampleShapesRows(r *rand.Rand, V int) ([]gpu.SampleParams, []float32) {
	return sampleShapedRows(r, sampleHistKinds, V)
}

// SampleShapesGRPO are CheckSampleShapes' rows of the GRPO-like decode.
func SampleShapesGRPO(r *rand.Rand, V int) ([]gpu.SampleParams, []float32) {
	grpo := gpu.SampleParams{Temperature: 1, TopK: 50, TopP: 0.95}
	return sampleFlatRows(r, []gpu.SampleParams{grpo, grpo, grpo, grpo}, V)
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

// cpuToken is the CPU reference's token of one row.
func cpuToken(row []float32, p gpu.SampleParams) int32 {
	t := make([]int32, 1)
	checkutil.Ref.SampleTokens(t, nil, row, []gpu.SampleParams{p}, 1, len(row))
	return t[0]
}
