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

// attnCachedGMax and attnCachedHDMax are attention.cuh's ATTC_GMAX and
// ATTC_HDMAX: the widest query group and head that attention_cached serves.
const attnCachedGMax, attnCachedHDMax = 16, 128

// AttentionCachedForward attends N new tokens to the KV cache [S,maxT,NKV,HD]:
// attention_cached, one block per (token, KV head) serving the head's query
// group, or attention_cached_head, one block per (token, query head), where
// the group has more than attnCachedGMax heads or a head more than
// attnCachedHDMax dimensions. One launch either way.
func (b *Backend) AttentionCachedForward(out, q, kcache, vcache []float32, slot, pos []int32, N, NH, NKV, HD, maxT int) {
	if N == 0 {
		return
	}
	scale := float32(1 / math.Sqrt(float64(HD)))
	maxLen := maxT // the scores' row stride: positions are not read on the host
	grouped := NH/NKV <= attnCachedGMax && HD <= attnCachedHDMax
	b.d.run("AttentionCachedForward", func(a *arena) {
		ps := a.alloc(int64(N*NH*maxLen) * 4)
		po, pq := a.out(out, N*NH*HD), a.in(q, N*NH*HD)
		pk, pv := a.in(kcache, len(kcache)), a.in(vcache, len(vcache))
		pslot, ppos := a.ints(slot, N), a.ints(pos, N)
		if grouped {
			b.d.launch("attention_cached", N*NKV, ptr(po), ptr(ps), ptr(pq), ptr(pk), ptr(pv), ptr(pslot), ptr(ppos),
				i64(N), i64(NH), i64(NKV), i64(HD), i64(maxT), i64(maxLen), f32(scale))
		} else {
			b.d.launch("attention_cached_head", N*NH, ptr(po), ptr(ps), ptr(pq), ptr(pk), ptr(pv), ptr(pslot), ptr(ppos),
				i64(N), i64(NH), i64(NKV), i64(HD), i64(maxT), i64(maxLen), f32(scale))
		}
	})
}
