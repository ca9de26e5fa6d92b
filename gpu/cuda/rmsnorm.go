package cuda

// RMSNorm (kernels/rmsnorm.cuh).
// CPU reference: gpu/cpu; the checks are in rmsnorm_check.go.

// RMSNormForward: out = inp * rstd * weight, rstd [N].
func (b *Backend) RMSNormForward(out, rstd []float32, inp, weight []float32, N, C int, eps float32) {
	b.d.run("RMSNormForward", func(a *arena) {
		b.d.launch("rmsnorm_forward", N, ptr(a.out(out, N*C)), ptr(a.out(rstd, N)), ptr(a.in(inp, N*C)),
			ptr(a.in(weight, C)), i64(N), i64(C), f32(eps))
	})
}

// RMSNormBackward: dinp overwritten, dweight accumulated.
func (b *Backend) RMSNormBackward(dinp, dweight []float32, dout, inp, weight, rstd []float32, N, C int) {
	b.d.run("RMSNormBackward", func(a *arena) {
		pd, px, pr := a.in(dout, N*C), a.in(inp, N*C), a.in(rstd, N)
		b.d.launch("rmsnorm_backward_dweight", gridFor(C), ptr(a.inout(dweight, C)), ptr(pd), ptr(px), ptr(pr),
			i64(N), i64(C))
		b.d.launch("rmsnorm_backward_dinp", N, ptr(a.out(dinp, N*C)), ptr(pd), ptr(px), ptr(a.in(weight, C)), ptr(pr),
			i64(N), i64(C))
	})
}
