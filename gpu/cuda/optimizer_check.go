package cuda

// Checks of the optimizer family against the CPU reference gpu/cpu (optimizer.go).

import (
	"fmt"
	"math"
	"math/rand/v2"
)

func checkSumSquaresScale(b Device) error {
	r := rand.New(rand.NewPCG(13, 13))
	x := randn(r, 1<<20+7, 1)
	s1, s2 := ref.SumSquares(x), b.SumSquares(x)
	// gpu/cpu adds float32 partial sums of 256 squares; the kernel adds in float64.
	if math.Abs(s1-s2) > 1e-6*s1 {
		return fmt.Errorf("SumSquares = %.12g on cuda, %.12g on cpu", s2, s1)
	}
	x1, x2 := clone(x), clone(x)
	ref.Scale(x1, 0.37)
	b.Scale(x2, 0.37)
	return compare("Scale", x2, x1, 0)
}

func checkAdamW(b Device) error {
	r := rand.New(rand.NewPCG(14, 14))
	const n = 4099
	p0, m0 := randn(r, n, 1), randn(r, n, 0.01)
	v0 := randn(r, n, 0.001)
	for i := range v0 {
		v0[i] *= v0[i]
	}
	p1, p2, m1, m2, v1, v2 := clone(p0), clone(p0), clone(m0), clone(m0), clone(v0), clone(v0)
	for step := 1; step <= 3; step++ {
		g := randn(r, n, 1)
		ref.AdamW(p1, g, m1, v1, step, 1e-3, 0.9, 0.999, 1e-8, 0.01)
		b.AdamW(p2, g, m2, v2, step, 1e-3, 0.9, 0.999, 1e-8, 0.01)
	}
	return compareAll(1e-6, "params", p2, p1, "m", m2, m1, "v", v2, v1)
}
