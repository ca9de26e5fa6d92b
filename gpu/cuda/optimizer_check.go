package cuda

// Checks of the optimizer family against the CPU reference gpu/cpu (optimizer.go).

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu"
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

// adamwState is n random parameters and AdamW moments (v >= 0).
func adamwState(r *rand.Rand, n int) (p, m, v []float32) {
	p, m, v = randn(r, n, 1), randn(r, n, 0.01), randn(r, n, 0.001)
	for i := range v {
		v[i] *= v[i]
	}
	return p, m, v
}

func checkAdamW(b Device) error {
	r := rand.New(rand.NewPCG(14, 14))
	const n = 4099
	p0, m0, v0 := adamwState(r, n)
	p1, p2, m1, m2, v1, v2 := clone(p0), clone(p0), clone(m0), clone(m0), clone(v0), clone(v0)
	for step := 1; step <= 3; step++ {
		g := randn(r, n, 1)
		ref.AdamW(p1, g, m1, v1, step, 1e-3, 0.9, 0.999, 1e-8, 0.01)
		b.AdamW(p2, g, m2, v2, step, 1e-3, 0.9, 0.999, 1e-8, 0.01)
	}
	return compareAll(1e-6, "params", p2, p1, "m", m2, m1, "v", v2, v1)
}

// checkClipAdamW: a device with gpu.ClippedAdamW (the clipping factor made
// on the device and applied as AdamW reads each gradient) leaves the
// parameters and moments of its own gpu.ClipGradNorm then AdamW bit for bit,
// with the same norm, over three steps of gradients that are clipped (max
// norm 1), that are not (1e6) and with no clipping (0); and they agree with
// the CPU reference's as checkAdamW's do. The clip_scale variant is off for
// its duration. A device without it (the CPU reference) passes.
func checkClipAdamW(b Device) error {
	ca, ok := b.(gpu.ClippedAdamW)
	if !ok {
		return nil
	}
	return withVariant(b, func(v *Variants) { v.ClipScale = false }, func() error {
		for _, maxNorm := range []float32{1, 1e6, 0} {
			r := rand.New(rand.NewPCG(15, 15))
			const n = 4099
			p0, m0, v0 := adamwState(r, n)
			pf, pr, pc := clone(p0), clone(p0), clone(p0)
			mf, mr, mc, vf, vr, vc := clone(m0), clone(m0), clone(m0), clone(v0), clone(v0), clone(v0)
			for step := 1; step <= 3; step++ {
				g := randn(r, n, 1)
				gf, gr, gc := clone(g), clone(g), clone(g)
				nf := ca.ClipAdamW(pf, gf, mf, vf, step, 1e-3, 0.9, 0.999, 1e-8, 0.01, maxNorm)
				nr := gpu.ClipGradNorm(b, gr, maxNorm)
				b.AdamW(pr, gr, mr, vr, step, 1e-3, 0.9, 0.999, 1e-8, 0.01)
				nc := gpu.ClipGradNorm(ref, gc, maxNorm)
				ref.AdamW(pc, gc, mc, vc, step, 1e-3, 0.9, 0.999, 1e-8, 0.01)
				if nf != nr || math.Abs(nf-nc) > 1e-6*nc {
					return fmt.Errorf("max norm %g step %d: ClipAdamW's norm %.17g, ClipGradNorm's %.17g, on cpu %.17g", maxNorm, step, nf, nr, nc)
				}
			}
			what := fmt.Sprintf("ClipAdamW (max norm %g) against ClipGradNorm then AdamW", maxNorm)
			if err := compareAll(0, what+": params", pf, pr, what+": m", mf, mr, what+": v", vf, vr); err != nil {
				return err
			}
			if err := compareAll(1e-6, "ClipAdamW params", pf, pc, "m", mf, mc, "v", vf, vc); err != nil {
				return fmt.Errorf("max norm %g, against cpu: %w", maxNorm, err)
			}
		}
		return nil
	})
}
