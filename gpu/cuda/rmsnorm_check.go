package cuda

// Checks of the rmsnorm family against the CPU reference gpu/cpu (rmsnorm.go).

import "math/rand/v2"

func checkRMSNorm(b Device) error {
	r := rand.New(rand.NewPCG(5, 5))
	const N, C = 13, 576
	inp, w := randn(r, N*C, 2), randn(r, C, 1)
	o1, o2 := make([]float32, N*C), make([]float32, N*C)
	r1, r2 := make([]float32, N), make([]float32, N)
	ref.RMSNormForward(o1, r1, inp, w, N, C, 1e-5)
	b.RMSNormForward(o2, r2, inp, w, N, C, 1e-5)
	dout := randn(r, N*C, 1)
	dw0 := randn(r, C, 1)
	di1, di2 := make([]float32, N*C), make([]float32, N*C)
	dw1, dw2 := clone(dw0), clone(dw0)
	ref.RMSNormBackward(di1, dw1, dout, inp, w, r1, N, C)
	b.RMSNormBackward(di2, dw2, dout, inp, w, r1, N, C)
	return compareAll(1e-5, "out", o2, o1, "rstd", r2, r1, "dinp", di2, di1, "dweight", dw2, dw1)
}
