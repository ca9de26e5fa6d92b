package cuda

// Token embedding (kernels/embedding.cuh): gather rows of the table, scatter-add their gradient.
// CPU reference: gpu/cpu; the checks are in embedding_check.go.

// EmbeddingForward: out [N,C] = wte[tokens[n]].
func (b *Backend) EmbeddingForward(out []float32, tokens []int32, wte []float32, N, C int) {
	b.d.run("EmbeddingForward", func(a *arena) {
		b.d.launch("embedding_forward", gridFor(N*C), ptr(a.out(out, N*C)), ptr(a.ints(tokens, N)),
			ptr(a.in(wte, len(wte))), i64(N), i64(C))
	})
}

// EmbeddingBackward: dwte[tokens[n]] += dout[n].
func (b *Backend) EmbeddingBackward(dwte []float32, dout []float32, tokens []int32, N, C int) {
	b.d.run("EmbeddingBackward", func(a *arena) {
		b.d.launch("embedding_backward", gridFor(N*C), ptr(a.inout(dwte, len(dwte))), ptr(a.in(dout, N*C)),
			ptr(a.ints(tokens, N)), i64(N), i64(C))
	})
}
