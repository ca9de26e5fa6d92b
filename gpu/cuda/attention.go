package cuda

// Causal grouped-query attention, for training and against the KV cache (kernels/attention.cuh).
// CPU reference: gpu/cpu; the checks are in attention_check.go.

import "math"

// AttentionForward is causal GQA attention. The probabilities live in device
// memory; scratch is not used.
func (b *Backend) AttentionForward(out, scratch []float32, q, k, v []float32, B, T, NH, NKV, HD int) {
	scale := float32(1 / math.Sqrt(float64(HD)))
	b.d.run("AttentionForward", func(a *arena) {
		pq, pk, pv := a.in(q, B*T*NH*HD), a.in(k, B*T*NKV*HD), a.in(v, B*T*NKV*HD)
		po := a.out(out, B*T*NH*HD)
		pp := a.alloc(int64(NH*T*T) * 4)
		for s := 0; s < B; s++ {
			b.d.launch("attention_probs", NH*T, ptr(pp), ptr(pq), ptr(pk), i64(s), i64(T), i64(NH), i64(NKV), i64(HD), f32(scale))
			b.d.launch("attention_out", gridFor(T*NH*HD), ptr(po), ptr(pp), ptr(pv), i64(s), i64(T), i64(NH), i64(NKV), i64(HD))
		}
	})
}

// AttentionBackward recomputes the probabilities per sequence, then dq, dk, dv.
func (b *Backend) AttentionBackward(dq, dk, dv, scratch []float32, dout, q, k, v []float32, B, T, NH, NKV, HD int) {
	scale := float32(1 / math.Sqrt(float64(HD)))
	b.d.run("AttentionBackward", func(a *arena) {
		pq, pk, pv := a.in(q, B*T*NH*HD), a.in(k, B*T*NKV*HD), a.in(v, B*T*NKV*HD)
		pdo := a.in(dout, B*T*NH*HD)
		pdq, pdk, pdv := a.out(dq, B*T*NH*HD), a.out(dk, B*T*NKV*HD), a.out(dv, B*T*NKV*HD)
		pp := a.alloc(int64(NH*T*T) * 4)
		pds := a.alloc(int64(NH*T*T) * 4)
		for s := 0; s < B; s++ {
			b.d.launch("attention_probs", NH*T, ptr(pp), ptr(pq), ptr(pk), i64(s), i64(T), i64(NH), i64(NKV), i64(HD), f32(scale))
			b.d.launch("attention_dscores", NH*T, ptr(pds), ptr(pp), ptr(pdo), ptr(pv), i64(s), i64(T), i64(NH), i64(NKV), i64(HD), f32(scale))
			b.d.launch("attention_dq", gridFor(T*NH*HD), ptr(pdq), ptr(pds), ptr(pk), i64(s), i64(T), i64(NH), i64(NKV), i64(HD))
			b.d.launch("attention_dkv", gridFor(T*NKV*HD), ptr(pdk), ptr(pdv), ptr(pds), ptr(pp), ptr(pq), ptr(pdo),
				i64(s), i64(T), i64(NH), i64(NKV), i64(HD))
		}
	})
}

// AttentionCachedForward attends N new tokens to the KV cache [S,maxT,NKV,HD].
func (b *Backend) AttentionCachedForward(out, q, kcache, vcache []float32, slot, pos []int32, N, NH, NKV, HD, maxT int) {
	if N == 0 {
		return
	}
	scale := float32(1 / math.Sqrt(float64(HD)))
	maxLen := maxT // the scores' row stride: positions are not read on the host
	b.d.run("AttentionCachedForward", func(a *arena) {
		ps := a.alloc(int64(N*NH*maxLen) * 4)
		b.d.launch("attention_cached", N*NH, ptr(a.out(out, N*NH*HD)), ptr(ps), ptr(a.in(q, N*NH*HD)),
			ptr(a.in(kcache, len(kcache))), ptr(a.in(vcache, len(vcache))), ptr(a.ints(slot, N)), ptr(a.ints(pos, N)),
			i64(N), i64(NH), i64(NKV), i64(HD), i64(maxT), i64(maxLen), f32(scale))
	})
}
