package cuda

// RMSNorm and its fusions with the residual add (kernels/rmsnorm.cuh).
// CPU reference: gpu/cpu; the checks are in rmsnorm_check.go.

// RMSNormForward: out = inp * rstd * weight, rstd [N]. In BF16 the
// kernel writes out's bfloat16 copy too (the shared activation copy that
// the products reading out use, bf16.go).
func (b *Backend) RMSNormForward(out, rstd []float32, inp, weight []float32, N, C int, eps float32) {
	b.d.run("RMSNormForward", func(a *arena) {
		po := a.out(out, N*C)
		b.d.launch("rmsnorm_forward", N, ptr(po), ptr(b.d.outputBF16(a, out, po, N*C)), ptr(a.out(rstd, N)),
			ptr(a.in(inp, N*C)), ptr(a.in(weight, C)), i64(N), i64(C), f32(eps))
	})
}

// RMSNormBackward: dinp overwritten, dweight accumulated.
func (b *Backend) RMSNormBackward(dinp, dweight []float32, dout, inp, weight, rstd []float32, N, C int) {
	b.d.run("RMSNormBackward", func(a *arena) {
		b.rmsnormBackward(a, dinp, dweight, dout, nil, inp, weight, rstd, N, C, false)
	})
}

// ResidualRMSNormForward: res = a + b (res may alias a or b), out =
// rmsnorm(res) * weight, rstd [N], in one kernel; in BF16 with out's
// bfloat16 copy (as RMSNormForward).
func (b *Backend) ResidualRMSNormForward(res, out, rstd []float32, x, y, weight []float32, N, C int, eps float32) {
	b.d.run("ResidualRMSNormForward", func(a *arena) {
		px, py := a.in(x, N*C), a.in(y, N*C) // before res's staging: res may alias them
		pr, po := a.out(res, N*C), a.out(out, N*C)
		b.d.launch("residual_rmsnorm_forward", N, ptr(pr), ptr(po), ptr(b.d.outputBF16(a, out, po, N*C)),
			ptr(a.out(rstd, N)), ptr(px), ptr(py), ptr(a.in(weight, C)), i64(N), i64(C), f32(eps))
	})
}

// ResidualRMSNormBackward: dres += the norm's input gradient for the output
// gradient dout + dout2 (dout2 may be nil), dweight accumulated.
func (b *Backend) ResidualRMSNormBackward(dres, dweight []float32, dout, dout2, res, weight, rstd []float32, N, C int) {
	b.d.run("ResidualRMSNormBackward", func(a *arena) {
		b.rmsnormBackward(a, dres, dweight, dout, dout2, res, weight, rstd, N, C, true)
	})
}

// rmsnormBackward launches the two backward kernels: dweight, then dinp
// (overwritten, or accumulated when add is set), in BF16 with dinp's
// bfloat16 copy (the output gradient of the products before the norm,
// bf16.go).
func (b *Backend) rmsnormBackward(a *arena, dinp, dweight, dout, dout2, inp, weight, rstd []float32, N, C int, add bool) {
	pd, pd2, px, pr := a.in(dout, N*C), a.in(dout2, N*C), a.in(inp, N*C), a.in(rstd, N)
	var pdinp dptr
	acc := 0
	if add {
		pdinp, acc = a.inout(dinp, N*C), 1
	} else {
		pdinp = a.out(dinp, N*C)
	}
	b.d.colsums(a, "rmsnorm_backward_dweight", a.inout(dweight, C), N, C, ptr(pd), ptr(pd2), ptr(px), ptr(pr),
		i64(N), i64(C))
	b.d.launch("rmsnorm_backward_dinp", N, ptr(pdinp), ptr(b.d.gradBF16(a, 0, dinp, pdinp, N*C)), ptr(pd), ptr(pd2), ptr(px),
		ptr(a.in(weight, C)), ptr(pr), i64(N), i64(C), i64(acc))
}
