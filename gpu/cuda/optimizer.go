package cuda

// The global gradient norm, clipping and AdamW (kernels/optimizer.cuh).
// CPU reference: gpu/cpu; the checks are in optimizer_check.go.

import (
	"math"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
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
	var s [1]float64
	b.d.run("SumSquares", func(a *arena) {
		b.d.sumSquares(a, a.stage(unsafe.Pointer(&s[0]), 8, false, true), a.in(x, n), n)
	})
	return s[0]
}

// sumSquares queues sum(x^2) of x [n] at px into the double at out:
// sum_squares' per-block partials, then sum_f64 over them.
func (d *device) sumSquares(a *arena, out, px dptr, n int) {
	grid := min(sumSquaresBlocks, (n+blockSize-1)/blockSize)
	pp := a.alloc(int64(grid) * 8)
	d.launch("sum_squares", grid, ptr(pp), ptr(px), i64(n))
	d.launch("sum_f64", 1, ptr(out), ptr(pp), i64(grid))
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
	b.d.run("AdamW", func(a *arena) {
		pb := b.d.paramsBF16(a, params, n) // before params are staged (and their copy marked stale)
		b.d.adamw(a, params, a.in(grads, n), m, v, pb, 0, step, lr, beta1, beta2, eps, weightDecay)
	})
}

// adamw queues the adamw kernel over params [n] with the gradients at pg,
// the bfloat16 copy to write at pb and the clipping factor at coef (0:
// none of either).
func (d *device) adamw(a *arena, params []float32, pg dptr, m, v []float32, pb, coef dptr, step int,
	lr, beta1, beta2, eps, weightDecay float32) {
	n := len(params)
	bc1 := float32(1 - math.Pow(float64(beta1), float64(step)))
	bc2 := float32(1 - math.Pow(float64(beta2), float64(step)))
	d.launch("adamw", gridFor(n), ptr(a.inout(params, n)), ptr(pg), ptr(a.inout(m, n)), ptr(a.inout(v, n)),
		ptr(pb), ptr(coef), i64(n), f32(lr), f32(beta1), f32(beta2), f32(eps), f32(weightDecay), f32(bc1), f32(bc2))
}

// ClipAdamW is gpu.ClipGradNorm(grads, maxNorm) then AdamW in one op
// (gpu.ClippedAdamW): the squares' sum stays on the device, where
// clip_coef makes ClipGradNorm's factor of it, and adamw scales each
// gradient by it as it reads it, instead of a pass of `scale` over the
// gradients between a synchronisation for the norm and the update. The
// parameters, moments and bfloat16 copies are ClipGradNorm's and AdamW's
// bit for bit; grads are left unscaled. The norm before clipping comes
// down after the update is queued (the op's one synchronisation). With
// maxNorm <= 0 it runs ClipGradNorm and AdamW.
func (b *Backend) ClipAdamW(params, grads, m, v []float32, step int, lr, beta1, beta2, eps, weightDecay, maxNorm float32) float64 {
	n := len(params)
	if maxNorm <= 0 || n == 0 {
		norm := gpu.ClipGradNorm(b, grads, maxNorm)
		b.AdamW(params, grads, m, v, step, lr, beta1, beta2, eps, weightDecay)
		return norm
	}
	var s [1]float64
	b.d.run("ClipAdamW", func(a *arena) {
		pb := b.d.paramsBF16(a, params, n) // before params are staged (and their copy marked stale)
		pg := a.in(grads, n)
		sum, coef := a.stage(unsafe.Pointer(&s[0]), 8, false, true), a.alloc(4)
		b.d.sumSquares(a, sum, pg, n)
		b.d.launch("clip_coef", 1, ptr(coef), ptr(sum), f32(maxNorm))
		b.d.adamw(a, params, pg, m, v, pb, coef, step, lr, beta1, beta2, eps, weightDecay)
	})
	return math.Sqrt(s[0])
}
