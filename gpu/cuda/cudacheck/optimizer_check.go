package cudacheck

// Checks of the optimizer family against the CPU reference gpu/cpu (optimizer.go).

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

func checkSumSquaresScale(b Device) error {
	r := rand.New(rand.NewPCG(13, 13))
	x := checkutil.Randn(r, 1<<20+7, 1)
	s1, s2 := checkutil.Ref.SumSquares(x), b.SumSquares(x)
	// gpu/cpu adds float32 partial sums of 256 squares; the kernel adds in float64.
	if math.Abs(s1-s2) > 1e-6*s1 {
		return fmt.Errorf("SumSquares = %.12g on cuda, %.12g on cpu", s2, s1)
	}
	x1, x2 := checkutil.Clone(x), checkutil.Clone(x)
	checkutil.Ref.Scale(x1, 0.37)
	b.Scale(x2, 0.37)
	return checkutil.Compare("Scale", x2, x1, 0)
}

// adamwState is n random parameters and AdamW moments (v >= 0).
func adamwState(r *rand.Rand, n int) (p, m, v []float32) {
	p, m, v = checkutil.Randn(r, n, 1), checkutil.Randn(r, n, 0.01), checkutil.Randn(r, n, 0.001)
	for i := range v {
		v[i] *= v[i]
	}
	return p, m, v
}

func CheckAdamW(b Device) error {
	r := rand.New(rand.NewPCG(14, 14))
	const n = 4099
	p0, m0, v0 := adamwState(r, n)
	p1, p2, m1, m2, v1, v2 := checkutil.Clone(p0), checkutil.Clone(p0), checkutil.Clone(m0), checkutil.Clone(m0), checkutil.Clone(v0), checkutil.Clone(v0)
	for step := 1; step <= 3; step++ {
		g := checkutil.Randn(r, n, 1)
		checkutil.Ref.AdamW(p1, g, m1, v1, step, 1e-3, 0.9, 0.999, 1e-8, 0.01)
		b.AdamW(p2, g, m2, v2, step, 1e-3, 0.9, 0.999, 1e-8, 0.01)
	}
	return checkutil.CompareAll(1e-6, "params", p2, p1, "m", m2, m1, "v", v2, v1)
}

// CheckClipAdamW: a device with gpu.ClippedAdamW (the clipping factor made
// on the device and applied as AdamW reads each gradient) leaves the
// parameters and moments of its own gpu.ClipGradNorm then AdamW bit for bit,
// with the same norm, over three steps of gradients that are clipped (max
// norm 1), that are not (1e6) and with no clipping (0); and they agree with
// the CPU reference's as checkAdamW's do. A device without it (the CPU
// reference) passes.
func CheckClipAdamW(b Device) error {
	ca, ok := b.(gpu.ClippedAdamW)
	if !ok {
		return nil
	}
	for _, maxNorm := range []float32{1, 1e6, 0} {
		r := rand.New(rand.NewPCG(15, 15))
		const n = 4099
		p0, m0, v0 := adamwState(r, n)
		pf, pr, pc := checkutil.Clone(p0), checkutil.Clone(p0), checkutil.Clone(p0)
		mf, mr, mc, vf, vr, vc := checkutil.Clone(m0), checkutil.Clone(m0), checkutil.Clone(m0), checkutil.Clone(v0), checkutil.Clone(v0), checkutil.Clone(v0)
		for step := 1; step <= 3; step++ {
			g := checkutil.Randn(r, n, 1)
			gf, gr, gc := checkutil.Clone(g), checkutil.Clone(g), checkutil.Clone(g)
			nf := ca.ClipAdamW(pf, gf, mf, vf, step, 1e-3, 0.9, 0.999, 1e-8, 0.01, maxNorm)
			nr := gpu.ClipGradNorm(b, gr, maxNorm)
			b.AdamW(pr, gr, mr, vr, step, 1e-3, 0.9, 0.999, 1e-8, 0.01)
			nc := gpu.ClipGradNorm(checkutil.Ref, gc, maxNorm)
			checkutil.Ref.AdamW(pc, gc, mc, vc, step, 1e-3, 0.9, 0.999, 1e-8, 0.01)
			if nf != nr || math.Abs(nf-nc) > 1e-6*nc {
				return fmt.Errorf("max norm %g step %d: ClipAdamW's norm %.17g, ClipGradNorm's %.17g, on cpu %.17g", maxNorm, step, nf, nr, nc)
			}
		}
		what := fmt.Sprintf("ClipAdamW (max norm %g) against ClipGradNorm then AdamW", maxNorm)
		if err := checkutil.CompareAll(0, what+": params", pf, pr, what+": m", mf, mr, what+": v", vf, vr); err != nil {
			return err
		}
		if err := checkutil.CompareAll(1e-6, "ClipAdamW params", pf, pc, "m", mf, mc, "v", vf, vc); err != nil {
			return fmt.Errorf("max norm %g, against cpu: %w", maxNorm, err)
		}
	}
	return nil
}
