package cudacheck

// Checks of the elementwise family against the CPU reference gpu/cpu (elementwise.go).

import (
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

func checkSwiGLU(b Device) error {
	r := rand.New(rand.NewPCG(10, 10))
	const n = 5000
	gate, up, dout := checkutil.Randn(r, n, 3), checkutil.Randn(r, n, 1), checkutil.Randn(r, n, 1)
	o1, o2 := make([]float32, n), make([]float32, n)
	checkutil.Ref.SwiGLUForward(o1, gate, up, n)
	b.SwiGLUForward(o2, gate, up, n)
	dg1, dg2, du1, du2 := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	checkutil.Ref.SwiGLUBackward(dg1, du1, dout, gate, up, n)
	b.SwiGLUBackward(dg2, du2, dout, gate, up, n)
	return checkutil.CompareAll(1e-5, "out", o2, o1, "dgate", dg2, dg1, "dup", du2, du1)
}

// CheckSwiGLUBackwardH: the fused op's dgate, dup and h against the CPU
// reference, and bit for bit against the device's own SwiGLUBackward and
// SwiGLUForward (the training step's gradients are the same with either
// sequence, the swiglu_recompute variant's or the default's); dout holds
// the other outputs' garbage first, and gate spans expf's range.
func CheckSwiGLUBackwardH(b Device) error {
	r := rand.New(rand.NewPCG(12, 12))
	const n = 5003
	gate, up, dout := checkutil.Randn(r, n, 12), checkutil.Randn(r, n, 1), checkutil.Randn(r, n, 1)
	gate[0], gate[1], gate[2] = 90, -90, 0
	h1, h2, h3 := make([]float32, n), checkutil.Randn(r, n, 9), make([]float32, n)
	dg1, dg2, dg3 := make([]float32, n), checkutil.Randn(r, n, 9), make([]float32, n)
	du1, du2, du3 := make([]float32, n), checkutil.Randn(r, n, 9), make([]float32, n)
	checkutil.Ref.SwiGLUBackwardH(dg1, du1, h1, dout, gate, up, n)
	b.SwiGLUBackwardH(dg2, du2, h2, dout, gate, up, n)
	if err := checkutil.CompareAll(1e-5, "h", h2, h1, "dgate", dg2, dg1, "dup", du2, du1); err != nil {
		return err
	}
	b.SwiGLUForward(h3, gate, up, n)
	b.SwiGLUBackward(dg3, du3, dout, gate, up, n)
	return checkutil.CompareAll(0, "h (SwiGLUForward on the device)", h2, h3, "dgate (SwiGLUBackward on the device)", dg2, dg3,
		"dup (SwiGLUBackward on the device)", du2, du3)
}

func checkResidual(b Device) error {
	r := rand.New(rand.NewPCG(11, 11))
	const n = 3001
	x, y, dout := checkutil.Randn(r, n, 1), checkutil.Randn(r, n, 1), checkutil.Randn(r, n, 1)
	o1, o2 := checkutil.Clone(x), checkutil.Clone(x) // out aliases a
	checkutil.Ref.ResidualForward(o1, o1, y, n)
	b.ResidualForward(o2, o2, y, n)
	da1, da2, db1, db2 := checkutil.Clone(x), checkutil.Clone(x), checkutil.Clone(y), checkutil.Clone(y)
	checkutil.Ref.ResidualBackward(da1, db1, dout, n)
	b.ResidualBackward(da2, db2, dout, n)
	return checkutil.CompareAll(0, "out", o2, o1, "da", da2, da1, "db", db2, db1)
}
