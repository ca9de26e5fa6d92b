package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// fusedShapes cover a vector tail (C not a multiple of 8), one row, and
// enough rows for several goroutines.
var fusedShapes = []struct{ N, C int }{{1, 8}, {3, 13}, {7, 64}, {64, 576}}

// runBoth runs f with the kernels of kernels.c (where the CPU has them) and
// with the Go loops.
func runBoth(t *testing.T, f func(t *testing.T, run func(func()))) {
	for _, kernels := range []bool{true, false} {
		if kernels && !useKernels {
			continue
		}
		t.Run(fmt.Sprintf("kernels %v", kernels), func(t *testing.T) {
			f(t, func(g func()) {
				if kernels {
					g()
				} else {
					withGo(g)
				}
			})
		})
	}
}

// TestResidualRMSNormForwardMatchesUnfused: the fused op gives exactly what
// ResidualForward then RMSNormForward give, with res separate from and
// aliasing a.
func TestResidualRMSNormForwardMatchesUnfused(t *testing.T) {
	runBoth(t, func(t *testing.T, run func(func())) {
		for _, sh := range fusedShapes {
			N, C := sh.N, sh.C
			r := rand.New(rand.NewPCG(uint64(N), uint64(C)))
			a, b, w := randSlice(r, N*C, 2), randSlice(r, N*C, 1), randSlice(r, C, 1)
			res1, out1, rstd1 := make([]float32, N*C), make([]float32, N*C), make([]float32, N)
			res2, out2, rstd2 := make([]float32, N*C), make([]float32, N*C), make([]float32, N)
			run(func() {
				be.ResidualForward(res1, a, b, N*C)
				be.RMSNormForward(out1, rstd1, res1, w, N, C, 1e-6)
				be.ResidualRMSNormForward(res2, out2, rstd2, a, b, w, N, C, 1e-6)
			})
			for _, x := range []struct {
				name      string
				got, want []float32
			}{{"res", res2, res1}, {"out", out2, out1}, {"rstd", rstd2, rstd1}} {
				if !slices.Equal(x.got, x.want) {
					t.Fatalf("N %d C %d: %s differs from the unfused ops'", N, C, x.name)
				}
			}
			// res aliasing a, as the generator writes the residual stream in place
			x := slices.Clone(a)
			run(func() { be.ResidualRMSNormForward(x, out2, rstd2, x, b, w, N, C, 1e-6) })
			if !slices.Equal(x, res1) || !slices.Equal(out2, out1) || !slices.Equal(rstd2, rstd1) {
				t.Fatalf("N %d C %d: with res aliasing a the results differ from the unfused ops'", N, C)
			}
		}
	})
}

// TestResidualRMSNormBackwardMatchesUnfused: the fused op gives, to
// rounding, what the model's three passes gave: dout += dout2,
// RMSNormBackward into scratch, dres += scratch; and with dout2 nil the
// last two alone. dweight accumulates in both.
func TestResidualRMSNormBackwardMatchesUnfused(t *testing.T) {
	runBoth(t, func(t *testing.T, run func(func())) {
		for _, sh := range fusedShapes {
			for _, two := range []bool{true, false} {
				N, C := sh.N, sh.C
				r := rand.New(rand.NewPCG(uint64(N), uint64(C)+7))
				x, w := randSlice(r, N*C, 2), randSlice(r, C, 1)
				out, rstd := make([]float32, N*C), make([]float32, N)
				be.RMSNormForward(out, rstd, x, w, N, C, 1e-6)
				d1, d2 := randSlice(r, N*C, 1), randSlice(r, N*C, 1)
				dres, dw := randSlice(r, N*C, 1), randSlice(r, C, 1)
				dres1, dw1 := slices.Clone(dres), slices.Clone(dw)
				dres2, dw2 := slices.Clone(dres), slices.Clone(dw)
				var dout2 []float32
				if two {
					dout2 = d2
				}
				run(func() {
					d := slices.Clone(d1)
					if two {
						be.ResidualForward(d, d, d2, N*C)
					}
					tmp := make([]float32, N*C)
					be.RMSNormBackward(tmp, dw1, d, x, w, rstd, N, C)
					be.ResidualForward(dres1, dres1, tmp, N*C)
					be.ResidualRMSNormBackward(dres2, dw2, d1, dout2, x, w, rstd, N, C)
				})
				name := fmt.Sprintf("N %d C %d dout2 %v", N, C, two)
				compare(t, name+": dres", dres2, dres1, 1e-5, 1)
				compare(t, name+": dweight", dw2, dw1, 1e-5, 1)
				if slices.Equal(dres2, dres) {
					t.Fatalf("%s: dres unchanged", name)
				}
			}
		}
	})
}
