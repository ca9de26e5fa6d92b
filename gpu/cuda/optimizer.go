package cuda

// The global gradient norm, clipping and AdamW (kernels/optimizer.cuh).
// CPU reference: gpu/cpu; the checks are in optimizer_check.go.

import (
	"math"
	"unsafe"
)

// sumSquaresBlocks is the grid of sum_squares; sum_f64 adds its partials
// on the device, so that one double comes down.
const sumSquaresBlocks = 1024

// SumSquares returns sum(x^2), accumulated in float64. It waits for the
// value (a synchronisation).
func (b *Backend) SumSquares(x []float32) float64 {
	n := len(x)
	if n == 0 {
		return 0
	}
	grid := min(sumSquaresBlocks, (n+blockSize-1)/blockSize)
	var s [1]float64
	b.d.run("SumSquares", func(a *arena) {
		pp := a.alloc(int64(grid) * 8)
		b.d.launch("sum_squares", grid, ptr(pp), ptr(a.in(x, n)), i64(n))
		b.d.launch("sum_f64", 1, ptr(a.stage(unsafe.Pointer(&s[0]), 8, false, true)), ptr(pp), i64(grid))
	})
	return s[0]
}

// Scale multiplies x by s in place.
func (b *Backend) Scale(x []float32, s float32) {
	n := len(x)
	b.d.run("Scale", func(a *arena) {
		b.d.launch("scale", gridFor(n), ptr(a.inout(x, n)), f32(s), i64(n))
	})
}

// AdamW is torch.optim.AdamW's update, on the device. Where the
// parameters' tensor has a current bfloat16 copy (bf16.go), the kernel
// writes the copy of the updated parameters too, so the copy stays current.
func (b *Backend) AdamW(params, grads, m, v []float32, step int, lr, beta1, beta2, eps, weightDecay float32) {
	n := len(params)
	bc1 := float32(1 - math.Pow(float64(beta1), float64(step)))
	bc2 := float32(1 - math.Pow(float64(beta2), float64(step)))
	b.d.run("AdamW", func(a *arena) {
		pb := b.d.paramsBF16(a, params, n) // before params are staged (and their copy marked stale)
		b.d.launch("adamw", gridFor(n), ptr(a.inout(params, n)), ptr(a.in(grads, n)), ptr(a.inout(m, n)), ptr(a.inout(v, n)),
			ptr(pb), i64(n), f32(lr), f32(beta1), f32(beta2), f32(eps), f32(weightDecay), f32(bc1), f32(bc2))
	})
}
