package cuda

// Log-softmax of the lm_head (kernels/logprob.cuh).
// CPU reference: gpu/cpu; the checks are in logprob_check.go.

// LogprobForward: logp, entropy, lse [N] from logits [N,V]. The kernel is
// logprob_forward, which reads each row once (a running max per thread).
func (b *Backend) LogprobForward(logp, entropy, lse []float32, logits []float32, targets []int32, N, V int) {
	b.d.run("LogprobForward", func(a *arena) {
		b.d.launch("logprob_forward", N, ptr(a.out(logp, N)), ptr(a.out(entropy, N)), ptr(a.out(lse, N)),
			ptr(a.in(logits, N*V)), ptr(a.ints(targets, N)), i64(N), i64(V))
	})
}

// LogprobBackward: dlogits [N,V] overwritten (may alias logits); in BF16
// the kernel writes its bfloat16 copy too (the LM head's output gradient,
// bf16.go).
func (b *Backend) LogprobBackward(dlogits []float32, logits, lse, entropy []float32, targets []int32,
	dlogp, dentropy []float32, N, V int) {
	b.d.run("LogprobBackward", func(a *arena) {
		pz := a.in(logits, N*V)
		po := a.out(dlogits, N*V)
		b.d.launch("logprob_backward", N, ptr(po), ptr(b.d.gradBF16(a, 0, dlogits, po, N*V)), ptr(pz), ptr(a.in(lse, N)),
			ptr(a.in(entropy, N)), ptr(a.ints(targets, N)), ptr(a.in(dlogp, N)), ptr(a.in(dentropy, N)), i64(N), i64(V))
	})
}
