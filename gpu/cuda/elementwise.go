package cuda

// SwiGLU and the residual add (kernels/elementwise.cuh).
// CPU reference: gpu/cpu; the checks are in elementwise_check.go.

// SwiGLUForward: out = silu(gate) * up; in BF16 the kernel writes out's
// bfloat16 copy too (the down product's input, bf16.go).
func (b *Backend) SwiGLUForward(out, gate, up []float32, n int) {
	b.d.run("SwiGLUForward", func(a *arena) {
		pg, pu := a.in(gate, n), a.in(up, n)
		po := a.out(out, n)
		b.d.launch("swiglu_forward", gridFor(n), ptr(po), ptr(b.d.outputBF16(a, out, po, n)), ptr(pg), ptr(pu), i64(n))
	})
}

// SwiGLUBackward: dgate, dup overwritten; in BF16 the kernel writes
// their bfloat16 copies too (the gate and up products' output gradients,
// bf16.go).
func (b *Backend) SwiGLUBackward(dgate, dup []float32, dout, gate, up []float32, n int) {
	d := b.d
	d.run("SwiGLUBackward", func(a *arena) {
		pd, pg, pu := a.in(dout, n), a.in(gate, n), a.in(up, n)
		pdg, pdu := a.out(dgate, n), a.out(dup, n)
		d.launch("swiglu_backward", gridFor(n), ptr(pdg), ptr(pdu), ptr(d.gradBF16(a, 0, dgate, pdg, n)),
			ptr(d.gradBF16(a, 1, dup, pdu, n)), ptr(pd), ptr(pg), ptr(pu), i64(n))
	})
}

// SwiGLUBackwardH: SwiGLUBackward and SwiGLUForward's out (h) in one
// kernel, one pass over gate and up; in BF16 it writes the bfloat16 copies
// of dgate and dup (the gradient copies, as SwiGLUBackward) and of h (the
// activation copy, as SwiGLUForward: the down product's weight gradient
// and its adapter's A gradient read it next). The gradient copies replace
// any that the norm's backward wrote of the residual stream's gradient, so
// that the down product's weight gradient, which reads it after this op,
// converts it again (C floats a token where the pass saves reading 2F).
func (b *Backend) SwiGLUBackwardH(dgate, dup, h []float32, dout, gate, up []float32, n int) {
	d := b.d
	d.run("SwiGLUBackwardH", func(a *arena) {
		pd, pg, pu := a.in(dout, n), a.in(gate, n), a.in(up, n)
		pdg, pdu, ph := a.out(dgate, n), a.out(dup, n), a.out(h, n)
		d.launch("swiglu_backward_h", gridFor(n), ptr(pdg), ptr(pdu), ptr(ph), ptr(d.gradBF16(a, 0, dgate, pdg, n)),
			ptr(d.gradBF16(a, 1, dup, pdu, n)), ptr(d.outputBF16(a, h, ph, n)), ptr(pd), ptr(pg), ptr(pu), i64(n))
	})
}

// SwiGLURecompute reports whether the swiglu_recompute variant is on:
// gpu/model's training step then recomputes h with SwiGLUForward before
// the down product's backward and runs SwiGLUBackward (the sequence before
// SwiGLUBackwardH; gpu.SwiGLURecompute).
func (b *Backend) SwiGLURecompute() bool { return b.Variants().SwiGLURecompute }

// GeGLUForward: see gpu.Backend; no kernel yet.
func (b *Backend) GeGLUForward(out, gate, up []float32, n int) {
	panic("cuda: GeGLUForward is not implemented")
}

// GeGLUBackwardH: see gpu.Backend; no kernel yet.
func (b *Backend) GeGLUBackwardH(dgate, dup, h []float32, dout, gate, up []float32, n int) {
	panic("cuda: GeGLUBackwardH is not implemented")
}

// SoftcapForward: see gpu.Backend; no kernel yet.
func (b *Backend) SoftcapForward(x []float32, cap float32, n int) {
	panic("cuda: SoftcapForward is not implemented")
}

// SoftcapBackward: see gpu.Backend; no kernel yet.
func (b *Backend) SoftcapBackward(dx, y []float32, cap float32, n int) {
	panic("cuda: SoftcapBackward is not implemented")
}

// ResidualForward: out = a + b.
func (b *Backend) ResidualForward(out, x, y []float32, n int) {
	b.d.run("ResidualForward", func(a *arena) {
		px, py := a.in(x, n), a.in(y, n)
		b.d.launch("residual_forward", gridFor(n), ptr(a.out(out, n)), ptr(px), ptr(py), i64(n))
	})
}

// ResidualBackward: da += dout, db += dout.
func (b *Backend) ResidualBackward(da, db []float32, dout []float32, n int) {
	b.d.run("ResidualBackward", func(a *arena) {
		b.d.launch("residual_backward", gridFor(n), ptr(a.inout(da, n)), ptr(a.inout(db, n)), ptr(a.in(dout, n)), i64(n))
	})
}
