package cuda

// Generation's fused decode ops (kernels/decode.cuh), gpu.DecodeFused: the
// generator runs one product for q, k and v and then decode_qkv (the
// biases, RoPE of q and k, the keys and values into the cache), where it
// ran three products, three add_bias, rope_qk and two scatter_rows; and
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
	pairs := 0
	if layout == gpu.RopePairs {
		pairs = 1
	}
	b.d.run("QKVRopeCacheForward", func(a *arena) {
		px := a.in(qkv, N*(QD+2*KD))
		var pb dptr
		if bias != nil {
			pb = a.in(bias, QD+2*KD)
		}
		pq, pk, pv := a.out(q, N*QD), a.inout(kcache, len(kcache)), a.inout(vcache, len(vcache))
		b.d.launch("decode_qkv", gridFor(N*(NH+2*NKV)*(HD/2)), ptr(pq), ptr(pk), ptr(pv), ptr(px), ptr(pb),
			ptr(a.ints(pos, N)), ptr(a.ints(rows, N)), ptr(a.in(cos, len(cos))), ptr(a.in(sin, len(sin))),
			i64(N), i64(NH), i64(NKV), i64(HD), i64(pairs))
	})
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
