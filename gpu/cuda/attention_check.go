package cuda

// Checks of the attention family against the CPU reference gpu/cpu (attention.go).

import (
	"fmt"
	"math"
	"math/rand/v2"
)

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

// attentionCachedCases are the shapes of checkAttentionCached: GQA groups
// of 1, 2, 3, 4 and 7 query heads (the last Qwen2.5-0.5B's 14/2), heads of
// 16 to 128 dimensions, tokens of one launch at different positions (the
// first token of a slot, contexts of one to more than 600 positions, more
// than one pass of a block's 256 threads), slots used twice; a group of
// 17 heads and a head of 144 dimensions.
var attentionCachedCases = []struct {
	NH, NKV, HD, S, maxT int
	slot, pos            []int32
}{
	{4, 2, 32, 3, 300, []int32{0, 2, 1, 2, 0}, []int32{0, 299, 17, 100, 1}},
	{2, 2, 64, 2, 700, []int32{1, 0, 1}, []int32{699, 0, 8}},
	{6, 2, 128, 3, 620, []int32{0, 1, 2, 1}, []int32{619, 5, 0, 300}},
	{14, 2, 64, 3, 650, []int32{2, 0, 1, 2, 0}, []int32{640, 1, 63, 0, 257}},
	{7, 1, 128, 2, 40, []int32{1, 0}, []int32{39, 9}},
	{4, 1, 16, 2, 70, []int32{0, 1, 1}, []int32{2, 69, 33}},
	{17, 1, 16, 2, 70, []int32{1, 0}, []int32{69, 3}},
	{2, 1, 144, 1, 20, []int32{0, 0}, []int32{19, 0}},
}

// checkAttentionCached compares AttentionCachedForward with gpu/cpu on
// attentionCachedCases. The device's output is a resident tensor poisoned
// with NaN first, so every element must be written.
func checkAttentionCached(b Device) error {
	r := rand.New(rand.NewPCG(9, 9))
	for _, c := range attentionCachedCases {
		N := len(c.pos)
		kc, vc := randn(r, c.S*c.maxT*c.NKV*c.HD, 1), randn(r, c.S*c.maxT*c.NKV*c.HD, 1)
		q := randn(r, N*c.NH*c.HD, 1)
		o1 := make([]float32, N*c.NH*c.HD)
		ref.AttentionCachedForward(o1, q, kc, vc, c.slot, c.pos, N, c.NH, c.NKV, c.HD, c.maxT)
		o2 := b.Alloc("check cached attention out", len(o1))
		poison := make([]float32, len(o1))
		for i := range poison {
			poison[i] = float32(math.NaN())
		}
		b.Upload(o2, poison)
		b.AttentionCachedForward(o2, q, kc, vc, c.slot, c.pos, N, c.NH, c.NKV, c.HD, c.maxT)
		got := host(b, o2)
		b.Free(o2)
		if err := compare("out", got, o1, 1e-5); err != nil {
			return fmt.Errorf("NH %d NKV %d HD %d positions %v: %w", c.NH, c.NKV, c.HD, c.pos, err)
		}
	}
	return nil
}
