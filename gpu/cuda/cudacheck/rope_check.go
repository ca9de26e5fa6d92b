package cudacheck

// Checks of the rope family against the CPU reference gpu/cpu (rope.go).

import (
	"math"
	"math/rand/v2"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cuda/internal/checkutil"
)

func checkRope(b Device) error {
	r := rand.New(rand.NewPCG(7, 7))
	const N, H, HD, P = 11, 3, 64, 40
	cos, sin := ropeTables(P, HD)
	pos := make([]int32, N)
	for i := range pos {
		pos[i] = int32(r.IntN(P))
	}
	inp := checkutil.Randn(r, N*H*HD, 1)
	for _, layout := range []gpu.RopeLayout{gpu.RopeHalf, gpu.RopePairs} {
		o1, o2 := make([]float32, len(inp)), make([]float32, len(inp))
		checkutil.Ref.RopeForward(o1, inp, pos, cos, sin, N, H, HD, layout)
		b.RopeForward(o2, inp, pos, cos, sin, N, H, HD, layout)
		d1, d2 := checkutil.Clone(inp), checkutil.Clone(inp) // in place: dinp aliases dout
		checkutil.Ref.RopeBackward(d1, d1, pos, cos, sin, N, H, HD, layout)
		b.RopeBackward(d2, d2, pos, cos, sin, N, H, HD, layout)
		if err := checkutil.CompareAll(1e-5, "out/"+layout.String(), o2, o1, "dinp/"+layout.String(), d2, d1); err != nil {
			return err
		}
	}
	return nil
}

// CheckRopeQK compares the fused RoPE of queries and keys, forward and
// backward, in both layouts, with gpu/cpu's RopeForward/RopeBackward of each
// tensor alone (GQA: fewer key heads than query heads).
func CheckRopeQK(b Device) error {
	r := rand.New(rand.NewPCG(7, 8))
	const N, NH, NKV, HD, P = 11, 4, 2, 32, 40
	cos, sin := ropeTables(P, HD)
	pos := make([]int32, N)
	for i := range pos {
		pos[i] = int32(r.IntN(P))
	}
	q, k := checkutil.Randn(r, N*NH*HD, 1), checkutil.Randn(r, N*NKV*HD, 1)
	for _, layout := range []gpu.RopeLayout{gpu.RopeHalf, gpu.RopePairs} {
		q1, k1, q2, k2 := make([]float32, len(q)), make([]float32, len(k)), checkutil.Clone(q), checkutil.Clone(k)
		checkutil.Ref.RopeForward(q1, q, pos, cos, sin, N, NH, HD, layout)
		checkutil.Ref.RopeForward(k1, k, pos, cos, sin, N, NKV, HD, layout)
		b.RopeQKForward(q2, k2, pos, cos, sin, N, NH, NKV, HD, layout)
		dq1, dk1, dq2, dk2 := make([]float32, len(q)), make([]float32, len(k)), checkutil.Clone(q), checkutil.Clone(k)
		checkutil.Ref.RopeBackward(dq1, q, pos, cos, sin, N, NH, HD, layout)
		checkutil.Ref.RopeBackward(dk1, k, pos, cos, sin, N, NKV, HD, layout)
		b.RopeQKBackward(dq2, dk2, pos, cos, sin, N, NH, NKV, HD, layout)
		l := "/" + layout.String()
		if err := checkutil.CompareAll(1e-5, "q"+l, q2, q1, "k"+l, k2, k1, "dq"+l, dq2, dq1, "dk"+l, dk2, dk1); err != nil {
			return err
		}
	}
	return nil
}

// ropeTables are the cos and sin tables [P,HD/2] of RoPE with theta 10000.
func ropeTables(P, HD int) (cos, sin []float32) {
	cos, sin = make([]float32, P*HD/2), make([]float32, P*HD/2)
	for p := 0; p < P; p++ {
		for i := 0; i < HD/2; i++ {
			th := float64(p) * math.Pow(10000, -2*float64(i)/float64(HD))
			cos[p*HD/2+i], sin[p*HD/2+i] = float32(math.Cos(th)), float32(math.Sin(th))
		}
	}
	return cos, sin
}
