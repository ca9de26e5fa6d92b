package cuda

// Generation's fused decode ops (kernels/decode.cuh), gpu.DecodeFused: the
// generator runs one product for q, k and v and then decode_qkv (the
// biases, RoPE of q and k, the keys and values into the cache), where it
// ran three products, three add_bias, rope_qk and two scatter_rows (on a
// layer with LoRA adapters on q, k or v, the products apart and then
// decode_qkv for rope_qk and the two scatter_rows); and
// one product for gate and up and then swiglu_rows, where it ran two
// products and swiglu_forward. CPU reference: the separate ops of gpu/cpu;
// the checks are in decode_check.go.

import "github.com/rlhost/rlhost/gpu"

var _ gpu.DecodeFused = (*Backend)(nil)

// DecodeFusion reports whether the generator uses the fused ops: on unless
// SetDecodeFusion(false).
func (b *Backend) DecodeFusion() bool { return !b.decodeUnfused.Load() }

// SetDecodeFusion switches the generator's fused ops on or off (off, it
// runs the separate ops, as gpu/cpu does), for the ops queued from now on.
func (b *Backend) SetDecodeFusion(on bool) { b.decodeUnfused.Store(!on) }

// QKVRopeCacheForward: q [N,QD] = RoPE(qkv's q + bq); the cache rows
// rows[n] of kcache and vcache [*,KD] get RoPE(k + bk) and v + bv (see
// gpu.DecodeFused). One launch, one thread per pair of channels.
func (b *Backend) QKVRopeCacheForward(q, kcache, vcache, qkv, bias []float32, pos, rows []int32, cos, sin []float32,
	N, NH, NKV, HD int, layout gpu.RopeLayout) {
	QD, KD := NH*HD, NKV*HD
	b.d.run("QKVRopeCacheForward", func(a *arena) {
		px := a.in(qkv, N*(QD+2*KD))
		var pb dptr
		if bias != nil {
			pb = a.in(bias, QD+2*KD)
		}
		b.decodeQKV(a, a.out(q, N*QD), kcache, vcache, px, px+dptr(4*QD), px+dptr(4*(QD+KD)), QD+2*KD, QD+2*KD, pb,
			pos, rows, cos, sin, N, NH, NKV, HD, layout)
	})
}

// RopeCacheForward: q [N,QD] rotated in place; the cache rows rows[n] of
// kcache and vcache get RoPE(k) and v (see gpu.DecodeFused): decode_qkv
// on three tensors, without biases.
func (b *Backend) RopeCacheForward(q, kcache, vcache, k, v []float32, pos, rows []int32, cos, sin []float32,
	N, NH, NKV, HD int, layout gpu.RopeLayout) {
	QD, KD := NH*HD, NKV*HD
	b.d.run("RopeCacheForward", func(a *arena) {
		pk, pv := a.in(k, N*KD), a.in(v, N*KD)
		pq := a.inout(q, N*QD)
		b.decodeQKV(a, pq, kcache, vcache, pq, pk, pv, QD, KD, 0, pos, rows, cos, sin, N, NH, NKV, HD, layout)
	})
}

// decodeQKV launches decode_qkv: q, k, v at qin, kin, vin with rows ldq
// and ldkv floats apart, bias (q | k | v) or 0.
func (b *Backend) decodeQKV(a *arena, pq dptr, kcache, vcache []float32, qin, kin, vin dptr, ldq, ldkv int, bias dptr,
	pos, rows []int32, cos, sin []float32, N, NH, NKV, HD int, layout gpu.RopeLayout) {
	pairs := 0
	if layout == gpu.RopePairs {
		pairs = 1
	}
	pk, pv := a.inout(kcache, len(kcache)), a.inout(vcache, len(vcache))
	b.d.launch("decode_qkv", gridFor(N*(NH+2*NKV)*(HD/2)), ptr(pq), ptr(pk), ptr(pv), ptr(qin), ptr(kin), ptr(vin),
		i64(ldq), i64(ldkv), ptr(bias), ptr(a.ints(pos, N)), ptr(a.ints(rows, N)), ptr(a.in(cos, len(cos))),
		ptr(a.in(sin, len(sin))), i64(N), i64(NH), i64(NKV), i64(HD), i64(pairs))
}

// SwiGLURowsForward: out [N,F] = silu(gate) * up from gu [N,2F], each row
// gate | up (see gpu.DecodeFused); in BF16 the kernel writes out's
// bfloat16 copy too (the down product's input), as SwiGLUForward does.
func (b *Backend) SwiGLURowsForward(out, gu []float32, N, F int) {
	b.d.run("SwiGLURowsForward", func(a *arena) {
		pg := a.in(gu, N*2*F)
		po := a.out(out, N*F)
		b.d.launch("swiglu_rows", gridFor(N*F), ptr(po), ptr(b.d.outputBF16(a, out, po, N*F)), ptr(pg), i64(N), i64(F))
	})
}
