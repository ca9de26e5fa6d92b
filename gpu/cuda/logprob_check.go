package cuda

// Checks of the logprob family against the CPU reference gpu/cpu (logprob.go).

import "math/rand/v2"

func checkLogprob(b Device) error {
	r := rand.New(rand.NewPCG(12, 12))
	const N, V = 9, 1000
	logits := randn(r, N*V, 4)
	targets := make([]int32, N)
	for i := range targets {
		targets[i] = int32(r.IntN(V))
	}
	targets[3] = -1
	lp1, lp2, h1, h2 := make([]float32, N), make([]float32, N), make([]float32, N), make([]float32, N)
	l1, l2 := make([]float32, N), make([]float32, N)
	ref.LogprobForward(lp1, h1, l1, logits, targets, N, V)
	b.LogprobForward(lp2, h2, l2, logits, targets, N, V)
	if err := compareAll(1e-5, "logp", lp2, lp1, "entropy", h2, h1, "lse", l2, l1); err != nil {
		return err
	}
	dlogp, dent := randn(r, N, 1), randn(r, N, 1)
	d1, d2 := clone(logits), clone(logits) // dlogits aliases logits
	ref.LogprobBackward(d1, d1, l1, h1, targets, dlogp, dent, N, V)
	b.LogprobBackward(d2, d2, l1, h1, targets, dlogp, dent, N, V)
	return compare("dlogits", d2, d1, 1e-5)
}
