package cudacheck

// Checks of the rmsnorm family against the CPU reference gpu/cpu (rmsnorm.go).

import (
	"fmt"
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

// checkRMSNorm at 13 rows and at 600 (the weight gradient's column sums
// in three chunks of 256 rows, the last partial).
func checkRMSNorm(b Device) error {
	for _, N := range []int{13, 600} {
		if err := checkRMSNormN(b, N); err != nil {
			return fmt.Errorf("N=%d: %w", N, err)
		}
	}
	return nil
}

func checkRMSNormN(b Device, N int) error {
	r := rand.New(rand.NewPCG(5, 5))
	const C = 576
	inp, w := checkutil.Randn(r, N*C, 2), checkutil.Randn(r, C, 1)
	o1, o2 := make([]float32, N*C), make([]float32, N*C)
	r1, r2 := make([]float32, N), make([]float32, N)
	checkutil.Ref.RMSNormForward(o1, r1, inp, w, N, C, 1e-5)
	b.RMSNormForward(o2, r2, inp, w, N, C, 1e-5)
	dout := checkutil.Randn(r, N*C, 1)
	dw0 := checkutil.Randn(r, C, 1)
	di1, di2 := make([]float32, N*C), make([]float32, N*C)
	dw1, dw2 := checkutil.Clone(dw0), checkutil.Clone(dw0)
	checkutil.Ref.RMSNormBackward(di1, dw1, dout, inp, w, r1, N, C)
	b.RMSNormBackward(di2, dw2, dout, inp, w, r1, N, C)
	return checkutil.CompareAll(1e-5, "out", o2, o1, "rstd", r2, r1, "dinp", di2, di1, "dweight", dw2, dw1)
}

// CheckResidualRMSNorm compares the fused residual + norm, forward (res
// separate from and aliasing a) and backward (with and without a second
// output gradient; dres accumulated), with gpu/cpu's, at 13 and 600 rows.
// Outputs are poisoned first, and the accumulated ones start from random
// values.
func CheckResidualRMSNorm(b Device) error {
	for _, N := range []int{13, 600} {
		if err := checkResidualRMSNormN(b, N); err != nil {
			return fmt.Errorf("N=%d: %w", N, err)
		}
	}
	return nil
}

func checkResidualRMSNormN(b Device, N int) error {
	r := rand.New(rand.NewPCG(5, 6))
	const C = 576
	x, y, w := checkutil.Randn(r, N*C, 2), checkutil.Randn(r, N*C, 1), checkutil.Randn(r, C, 1)
	poison := func(n int) []float32 {
		p := make([]float32, n)
		for i := range p {
			p[i] = 1e30
		}
		return p
	}
	res1, o1, r1 := make([]float32, N*C), make([]float32, N*C), make([]float32, N)
	res2, o2, r2 := poison(N*C), poison(N*C), poison(N)
	checkutil.Ref.ResidualRMSNormForward(res1, o1, r1, x, y, w, N, C, 1e-5)
	b.ResidualRMSNormForward(res2, o2, r2, x, y, w, N, C, 1e-5)
	if err := checkutil.CompareAll(1e-5, "res", res2, res1, "out", o2, o1, "rstd", r2, r1); err != nil {
		return err
	}
	inplace, o3, r3 := checkutil.Clone(x), poison(N*C), poison(N)
	b.ResidualRMSNormForward(inplace, o3, r3, inplace, y, w, N, C, 1e-5)
	if err := checkutil.CompareAll(1e-5, "res (in place)", inplace, res1, "out (res in place)", o3, o1,
		"rstd (res in place)", r3, r1); err != nil {
		return err
	}
	d1, d2 := checkutil.Randn(r, N*C, 1), checkutil.Randn(r, N*C, 1)
	dres0, dw0 := checkutil.Randn(r, N*C, 1), checkutil.Randn(r, C, 1)
	for _, dout2 := range [][]float32{d2, nil} {
		dres1, dres2 := checkutil.Clone(dres0), checkutil.Clone(dres0)
		dw1, dw2 := checkutil.Clone(dw0), checkutil.Clone(dw0)
		checkutil.Ref.ResidualRMSNormBackward(dres1, dw1, d1, dout2, res1, w, r1, N, C)
		b.ResidualRMSNormBackward(dres2, dw2, d1, dout2, res1, w, r1, N, C)
		what := " (dout2 nil)"
		if dout2 != nil {
			what = " (dout + dout2)"
		}
		if err := checkutil.CompareAll(1e-5, "dres"+what, dres2, dres1, "dweight"+what, dw2, dw1); err != nil {
			return err
		}
	}
	return nil
}
