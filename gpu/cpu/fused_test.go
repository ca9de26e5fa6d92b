package cpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/rlhost/rlhost/gpu"
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

// TestRopeQKMatchesUnfused: RoPE of q and k in one pass gives exactly what
// RopeForward / RopeBackward of each give, in both layouts.
func TestRopeQKMatchesUnfused(t *testing.T) {
	const N, NH, NKV, HD, P = 9, 4, 2, 16, 12
	r := rand.New(rand.NewPCG(3, 4))
	cos, sin := ropeTables(P, HD, 10000)
	pos := make([]int32, N)
	for i := range pos {
		pos[i] = int32(r.IntN(P))
	}
	q, k := randSlice(r, N*NH*HD, 1), randSlice(r, N*NKV*HD, 1)
	for _, layout := range []gpu.RopeLayout{gpu.RopeHalf, gpu.RopePairs} {
		for _, sign := range []string{"forward", "backward"} {
			q1, k1, q2, k2 := slices.Clone(q), slices.Clone(k), slices.Clone(q), slices.Clone(k)
			if sign == "forward" {
				be.RopeForward(q1, q1, pos, cos, sin, N, NH, HD, layout)
				be.RopeForward(k1, k1, pos, cos, sin, N, NKV, HD, layout)
				be.RopeQKForward(q2, k2, pos, cos, sin, N, NH, NKV, HD, layout)
			} else {
				be.RopeBackward(q1, q1, pos, cos, sin, N, NH, HD, layout)
				be.RopeBackward(k1, k1, pos, cos, sin, N, NKV, HD, layout)
				be.RopeQKBackward(q2, k2, pos, cos, sin, N, NH, NKV, HD, layout)
			}
			if !slices.Equal(q2, q1) || !slices.Equal(k2, k1) {
				t.Fatalf("%v %s: differs from the unfused ops", layout, sign)
			}
			if slices.Equal(q2, q) || slices.Equal(k2, k) {
				t.Fatalf("%v %s: q or k not rotated", layout, sign)
			}
		}
	}
}

// BenchmarkResidualRMSNorm times the fused residual + norm ops against the
// passes they replace, at a SmolLM2-135M training step's shape (N 1024
// tokens = B4 x T256, C 576): forward ResidualForward + RMSNormForward
// against ResidualRMSNormForward; backward ResidualForward (sum of two
// output gradients) + RMSNormBackward + ResidualForward (into dres) against
// ResidualRMSNormBackward. Each sub-benchmark reports GB/s of the tensors
// the unfused passes move, so the two are compared on the same bytes.
func BenchmarkResidualRMSNorm(b *testing.B) {
	const N, C = 1024, 576
	r := rand.New(rand.NewPCG(9, 9))
	x, y, w := randSlice(r, N*C, 1), randSlice(r, N*C, 1), randSlice(r, C, 1)
	res, out, tmp, rstd := make([]float32, N*C), make([]float32, N*C), make([]float32, N*C), make([]float32, N)
	d1, d2, dres, dw := randSlice(r, N*C, 1), randSlice(r, N*C, 1), make([]float32, N*C), make([]float32, C)
	be.RMSNormForward(out, rstd, x, w, N, C, 1e-6)
	for _, bc := range []struct {
		name   string
		floats int // per row, moved by the unfused passes
		run    func()
	}{
		{"forward-unfused", 5, func() {
			be.ResidualForward(res, x, y, N*C)
			be.RMSNormForward(out, rstd, res, w, N, C, 1e-6)
		}},
		{"forward-fused", 5, func() { be.ResidualRMSNormForward(res, out, rstd, x, y, w, N, C, 1e-6) }},
		{"backward-unfused", 11, func() {
			be.ResidualForward(d1, d1, d2, N*C)
			be.RMSNormBackward(tmp, dw, d1, x, w, rstd, N, C)
			be.ResidualForward(dres, dres, tmp, N*C)
		}},
		{"backward-fused", 11, func() { be.ResidualRMSNormBackward(dres, dw, d1, d2, x, w, rstd, N, C) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				bc.run()
			}
			b.ReportMetric(float64(bc.floats)*4*N*C*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}
