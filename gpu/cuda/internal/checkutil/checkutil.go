// Package checkutil holds what gpu/cuda/cudacheck and gpu/cuda's own tests
// share: the CPU reference backend (Ref), seeded inputs (Randn), the
// comparison with a tolerance (Compare), the cached-attention shapes and the
// GRPO groups workload (a rollout with a tool turn over model.Generator).
package checkutil

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
)

// Randn is n normal values of standard deviation s.
func Randn(r *rand.Rand, n int, s float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * s)
	}
	return x
}

// Clone is a copy of x.
func Clone(x []float32) []float32 { return append([]float32(nil), x...) }

// Compare reports the worst element of got (CUDA) against want (CPU) when
// |got-want| > tol*max(1, max|want|).
func Compare(name string, got, want []float32, tol float64) error {
	if len(got) != len(want) {
		return fmt.Errorf("%s: %d values, want %d", name, len(got), len(want))
	}
	scale := 1.0
	for _, w := range want {
		scale = max(scale, math.Abs(float64(w)))
	}
	worst, at := 0.0, -1
	for i := range got {
		d := math.Abs(float64(got[i]) - float64(want[i]))
		if d > worst || math.IsNaN(d) {
			worst, at = d, i
			if math.IsNaN(d) {
				break
			}
		}
	}
	if at >= 0 && (worst > tol*scale || math.IsNaN(worst)) {
		return fmt.Errorf("%s[%d] = %g on cuda, %g on cpu (|diff| %.3g > %.3g)", name, at, got[at], want[at], worst, tol*scale)
	}
	return nil
}

// CompareAll is Compare over (name, got, want) triples, the first error.
func CompareAll(tol float64, pairs ...any) error {
	for i := 0; i+2 < len(pairs); i += 3 {
		if err := Compare(pairs[i].(string), pairs[i+1].([]float32), pairs[i+2].([]float32), tol); err != nil {
			return err
		}
	}
	return nil
}

var Ref = cpu.New()

// Host downloads the tensor x of a backend.
func Host(b gpu.Backend, x []float32) []float32 {
	h := make([]float32, len(x))
	b.Download(h, x)
	return h
}
