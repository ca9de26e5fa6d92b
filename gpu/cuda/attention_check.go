package cuda

// Checks of the attention family against the CPU reference gpu/cpu (attention.go).

import "math/rand/v2"

func checkAttention(b Device) error {
	r := rand.New(rand.NewPCG(8, 8))
	const B, T, NH, NKV, HD = 2, 19, 6, 2, 16
	q, k, v := randn(r, B*T*NH*HD, 1), randn(r, B*T*NKV*HD, 1), randn(r, B*T*NKV*HD, 1)
	o1, o2 := make([]float32, len(q)), make([]float32, len(q))
	scratch := make([]float32, 2*NH*T*T)
	ref.AttentionForward(o1, scratch, q, k, v, B, T, NH, NKV, HD)
	b.AttentionForward(o2, scratch, q, k, v, B, T, NH, NKV, HD)
	if err := compare("out", o2, o1, 1e-5); err != nil {
		return err
	}
	dout := randn(r, len(q), 1)
	dq1, dq2 := make([]float32, len(q)), make([]float32, len(q))
	dk1, dk2, dv1, dv2 := randn(r, len(k), 1), randn(r, len(k), 1), randn(r, len(v), 1), randn(r, len(v), 1)
	ref.AttentionBackward(dq1, dk1, dv1, scratch, dout, q, k, v, B, T, NH, NKV, HD)
	b.AttentionBackward(dq2, dk2, dv2, scratch, dout, q, k, v, B, T, NH, NKV, HD)
	return compareAll(1e-5, "dq", dq2, dq1, "dk", dk2, dk1, "dv", dv2, dv1)
}

func checkAttentionCached(b Device) error {
	r := rand.New(rand.NewPCG(9, 9))
	const S, maxT, NH, NKV, HD, N = 3, 300, 4, 2, 32, 5 // 300 > one block of positions
	kc, vc := randn(r, S*maxT*NKV*HD, 1), randn(r, S*maxT*NKV*HD, 1)
	q := randn(r, N*NH*HD, 1)
	slot := []int32{0, 2, 1, 2, 0}
	pos := []int32{0, 299, 17, 100, 1}
	o1, o2 := make([]float32, N*NH*HD), make([]float32, N*NH*HD)
	ref.AttentionCachedForward(o1, q, kc, vc, slot, pos, N, NH, NKV, HD, maxT)
	b.AttentionCachedForward(o2, q, kc, vc, slot, pos, N, NH, NKV, HD, maxT)
	return compare("out", o2, o1, 1e-5)
}
