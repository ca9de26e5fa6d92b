package cuda

// Rotary position embedding (kernels/rope.cuh).
// CPU reference: gpu/cpu; the checks are in rope_check.go.

import "github.com/rlhost/rlhost/gpu"

// RopeForward rotates [N,H,HD] by each token's angles.
func (b *Backend) RopeForward(out, inp []float32, pos []int32, cos, sin []float32, N, H, HD int, layout gpu.RopeLayout) {
	b.rope("RopeForward", out, inp, pos, cos, sin, N, H, HD, layout, 1)
}

// RopeBackward rotates the gradient by the opposite angles.
func (b *Backend) RopeBackward(dinp, dout []float32, pos []int32, cos, sin []float32, N, H, HD int, layout gpu.RopeLayout) {
	b.rope("RopeBackward", dinp, dout, pos, cos, sin, N, H, HD, layout, -1)
}

func (b *Backend) rope(op string, out, inp []float32, pos []int32, cos, sin []float32, N, H, HD int, layout gpu.RopeLayout, sign float32) {
	half := HD / 2
	pairs := 0
	if layout == gpu.RopePairs {
		pairs = 1
	}
	b.d.run(op, func(a *arena) {
		pi := a.in(inp, N*H*HD) // staged before out: an aliased out shares this buffer
		po := a.out(out, N*H*HD)
		b.d.launch("rope", gridFor(N*H*half), ptr(po), ptr(pi), ptr(a.ints(pos, N)),
			ptr(a.in(cos, len(cos))), ptr(a.in(sin, len(sin))), i64(N), i64(H), i64(HD), i64(pairs), f32(sign))
	})
}

// RopeQKForward rotates q [N,NH,HD] and k [N,NKV,HD] in place in one launch.
func (b *Backend) RopeQKForward(q, k []float32, pos []int32, cos, sin []float32, N, NH, NKV, HD int, layout gpu.RopeLayout) {
	b.ropeQK("RopeQKForward", q, k, pos, cos, sin, N, NH, NKV, HD, layout, 1)
}

// RopeQKBackward rotates dq and dk back in place in one launch; in BF16
// the kernel writes their bfloat16 copies too (the q and k products'
// output gradients, bf16.go).
func (b *Backend) RopeQKBackward(dq, dk []float32, pos []int32, cos, sin []float32, N, NH, NKV, HD int, layout gpu.RopeLayout) {
	b.ropeQK("RopeQKBackward", dq, dk, pos, cos, sin, N, NH, NKV, HD, layout, -1)
}

func (b *Backend) ropeQK(op string, q, k []float32, pos []int32, cos, sin []float32, N, NH, NKV, HD int, layout gpu.RopeLayout, sign float32) {
	half := HD / 2
	pairs := 0
	if layout == gpu.RopePairs {
		pairs = 1
	}
	d := b.d
	d.run(op, func(a *arena) {
		pq, pk := a.inout(q, N*NH*HD), a.inout(k, N*NKV*HD)
		var qb, kb dptr
		if sign < 0 { // the backward: dq and dk are the q and k products' output gradients (bf16.go)
			qb, kb = d.gradBF16(a, 0, q, pq, N*NH*HD), d.gradBF16(a, 1, k, pk, N*NKV*HD)
		}
		d.launch("rope_qk", gridFor(N*(NH+NKV)*half), ptr(pq), ptr(pk), ptr(qb), ptr(kb),
			ptr(a.ints(pos, N)), ptr(a.in(cos, len(cos))), ptr(a.in(sin, len(sin))), i64(N), i64(NH), i64(NKV), i64(HD),
			i64(pairs), f32(sign))
	})
}
