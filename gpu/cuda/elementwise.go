package cuda

// SwiGLU, GeGLU, soft-capping and the residual add (kernels/elementwise.cuh).
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

// GeGLUForward: out = gelu_tanh(gate) * up (Gemma's MLP; out may alias
// gate or up); in BF16 the kernel writes out's bfloat16 copy too (the
// down product's input), as SwiGLUForward does.
func (b *Backend) GeGLUForward(out, gate, up []float32, n int) {
	b.d.run("GeGLUForward", func(a *arena) {
		pg, pu := a.in(gate, n), a.in(up, n)
		po := a.out(out, n)
		b.d.launch("geglu_forward", gridFor(n), ptr(po), ptr(b.d.outputBF16(a, out, po, n)), ptr(pg), ptr(pu), i64(n))
	})
}

// GeGLUBackwardH: dgate, dup and h = GeGLUForward's out in one kernel, one
// pass over gate and up, with the bfloat16 copies SwiGLUBackwardH writes
// (dgate and dup into the gradient copies, h into the activation copy).
func (b *Backend) GeGLUBackwardH(dgate, dup, h []float32, dout, gate, up []float32, n int) {
	d := b.d
	d.run("GeGLUBackwardH", func(a *arena) {
		pd, pg, pu := a.in(dout, n), a.in(gate, n), a.in(up, n)
		pdg, pdu, ph := a.out(dgate, n), a.out(dup, n), a.out(h, n)
		d.launch("geglu_backward_h", gridFor(n), ptr(pdg), ptr(pdu), ptr(ph), ptr(d.gradBF16(a, 0, dgate, pdg, n)),
			ptr(d.gradBF16(a, 1, dup, pdu, n)), ptr(d.outputBF16(a, h, ph, n)), ptr(pd), ptr(pg), ptr(pu), i64(n))
	})
}

// SoftcapForward: x = cap * tanh(x / cap) in place (Gemma's logit
// soft-capping).
func (b *Backend) SoftcapForward(x []float32, cap float32, n int) {
	b.d.run("SoftcapForward", func(a *arena) {
		b.d.launch("softcap_forward", gridFor(n), ptr(a.inout(x, n)), f32(cap), i64(n))
	})
}

// SoftcapBackward: dx *= 1 - (y/cap)^2 in place; in BF16 the kernel writes
// dx's bfloat16 copy into the gradient copy (dx is the LM head product's
// output gradient next, which LogprobBackward's copy no longer holds).
func (b *Backend) SoftcapBackward(dx, y []float32, cap float32, n int) {
	d := b.d
	d.run("SoftcapBackward", func(a *arena) {
		py := a.in(y, n)
		pdx := a.inout(dx, n)
		d.launch("softcap_backward", gridFor(n), ptr(pdx), ptr(d.gradBF16(a, 0, dx, pdx, n)), ptr(py), f32(cap), i64(n))
	})
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
