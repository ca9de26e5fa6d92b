package cudacheck

// Checks of the embedding family against the CPU reference gpu/cpu (embedding.go).

import (
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

func checkEmbedding(b Device) error {
	r := rand.New(rand.NewPCG(4, 4))
	const V, C, N = 50, 96, 37
	wte := checkutil.Randn(r, V*C, 1)
	tokens := make([]int32, N)
	for i := range tokens {
		tokens[i] = int32(r.IntN(V))
	}
	tokens[1] = tokens[0] // a repeated token accumulates
	out1, out2 := make([]float32, N*C), make([]float32, N*C)
	checkutil.Ref.EmbeddingForward(out1, tokens, wte, N, C)
	b.EmbeddingForward(out2, tokens, wte, N, C)
	dout := checkutil.Randn(r, N*C, 1)
	d0 := checkutil.Randn(r, V*C, 1)
	dw1, dw2 := checkutil.Clone(d0), checkutil.Clone(d0)
	checkutil.Ref.EmbeddingBackward(dw1, dout, tokens, N, C)
	b.EmbeddingBackward(dw2, dout, tokens, N, C)
	return checkutil.CompareAll(1e-5, "out", out2, out1, "dwte", dw2, dw1)
}
