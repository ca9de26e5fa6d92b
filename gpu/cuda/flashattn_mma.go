package cuda

// The fused attention's products on the bf16 tensor cores
// (kernels/flashattn.cuh, flash_forward_mma; the product kernels/mma.cuh):
// where the products are bf16 (device.flashMMA). The checks are in
// cudacheck/flashattn_check.go and mma_check.go.

import (
	"fmt"
	"unsafe"
)

// flashMMAQueries is FA_MQ of flashattn.cuh: the queries of a block of the
// tensor-core forward (8 warps of 16 rows).
const flashMMAQueries = 128

// flashForwardMMA launches the tensor-core forward inside
// AttentionVarlenForward's op: one block per (sequence, tile of 128
// queries, head), for head dimensions up to 64 (two blocks per SM) the
// kernel with ldmatrix and double-buffered key tiles
// (flash_attention_forward_ldsm_mma64) or, with a window, the one without
// (flash_attention_forward_mma64); else the one up to 128.
func (b *Backend) flashForwardMMA(a *arena, cu dptr, out, lse, q, k, v []float32, S, N, maxT, NH, NKV, HD int, scale float32,
	window int) {
	grid := S * ((maxT + flashMMAQueries - 1) / flashMMAQueries) * NH
	po, pl := a.out(out, N*NH*HD), a.out(lse, N*NH)
	pq, pk, pv := a.in(q, N*NH*HD), a.in(k, N*NKV*HD), a.in(v, N*NKV*HD)
	if HD <= 64 {
		if window == 0 { // the same grid and arguments, no window
			b.d.launch("flash_attention_forward_ldsm_mma64", grid, ptr(po), ptr(pl), ptr(pq), ptr(pk), ptr(pv), ptr(cu),
				i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale))
			return
		}
		b.d.launch("flash_attention_forward_mma64", grid, ptr(po), ptr(pl), ptr(pq), ptr(pk), ptr(pv), ptr(cu),
			i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale), i64(window))
		return
	}
	b.d.launch("flash_attention_forward_mma128", grid, ptr(po), ptr(pl), ptr(pq), ptr(pk), ptr(pv), ptr(cu),
		i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale), i64(window))
}

// flashBackwardMMA launches the tensor-core backward inside
// AttentionVarlenBackward's op, on its staged operands and D, with grids
// of 64 keys, or 64 queries, a block. For HD <= 64: dK and dV by one block
// per query head and key tile and the reduction over each group
// (flashBackwardDKVHeads), dQ by flash_attention_backward_dq_ldsm_mma64:
// an H100 proof at 960b55b measured them 2.3x and 1.14x faster than the
// kernels they replaced (one block per key/value head; K staged twice),
// which were deleted after it. Above 64 dK and dV take two kernels (flashattn.cuh: their
// accumulators and fragments together exceed a thread's registers).
func (b *Backend) flashBackwardMMA(a *arena, cu, pq, pk, pv, pdo, plse, pD dptr, dq, dk, dv []float32,
	S, N, maxT, NH, NKV, HD int, scale float32, window int) {
	pdq, pdk, pdv := a.out(dq, N*NH*HD), a.out(dk, N*NKV*HD), a.out(dv, N*NKV*HD)
	keys, queries := flashBlocks(S, maxT, NKV), flashBlocks(S, maxT, NH)
	if HD <= 64 {
		b.flashBackwardDKVHeads(a, cu, pq, pk, pv, pdo, plse, pD, pdk, pdv, S, N, maxT, NH, NKV, HD, scale, window)
		b.d.launch("flash_attention_backward_dq_ldsm_mma64", queries, ptr(pdq),
			ptr(pq), ptr(pk), ptr(pv), ptr(pdo), ptr(plse), ptr(pD), ptr(cu),
			i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale), i64(window))
		return
	}
	b.d.launch("flash_attention_backward_dk_mma128", keys, ptr(pdk), ptr(pdv),
		ptr(pq), ptr(pk), ptr(pv), ptr(pdo), ptr(plse), ptr(pD), ptr(cu),
		i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale), i64(window))
	b.d.launch("flash_attention_backward_dv_mma128", keys, ptr(pdk), ptr(pdv),
		ptr(pq), ptr(pk), ptr(pv), ptr(pdo), ptr(plse), ptr(pD), ptr(cu),
		i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale), i64(window))
	b.d.launch("flash_attention_backward_dq_mma128", queries, ptr(pdq),
		ptr(pq), ptr(pk), ptr(pv), ptr(pdo), ptr(plse), ptr(pD), ptr(cu),
		i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale), i64(window))
}

// flashBackwardDKVHeads launches dK and dV for HD <= 64: one block per
// (sequence, tile of 64 keys, query head) writing its head's partials to
// arena scratch [N, NH, HD] for dK and for dV, then
// flash_attention_backward_dkv_reduce summing each key/value head's group
// of query heads in order into dk, dv.
func (b *Backend) flashBackwardDKVHeads(a *arena, cu, pq, pk, pv, pdo, plse, pD, pdk, pdv dptr,
	S, N, maxT, NH, NKV, HD int, scale float32, window int) {
	part := int64(N*NH*HD) * 4
	ppk, ppv := a.alloc(part), a.alloc(part)
	b.d.launch("flash_attention_backward_dkv_heads_mma64", flashBlocks(S, maxT, NH), ptr(ppk), ptr(ppv),
		ptr(pq), ptr(pk), ptr(pv), ptr(pdo), ptr(plse), ptr(pD), ptr(cu),
		i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale), i64(window))
	b.d.launch("flash_attention_backward_dkv_reduce", gridFor(N*NKV*HD), ptr(pdk), ptr(pdv), ptr(ppk), ptr(ppv),
		i64(N), i64(NH), i64(NKV), i64(HD))
}

// MMAProbe: see MMAProber. One warp per problem, 8 to a block.
func (b *Backend) MMAProbe(d []float32, a, bm []uint32, c []float32, count int) {
	if count <= 0 {
		return
	}
	if len(a) < count*128 || len(bm) < count*64 || len(c) < count*128 || len(d) < count*128 {
		panic(&Error{"MMAProbe", fmt.Errorf("registers for %d problems: a %d (want %d), b %d (%d), c %d and d %d (%d)",
			count, len(a), count*128, len(bm), count*64, len(c), len(d), count*128)})
	}
	b.d.run("MMAProbe", func(ar *arena) {
		pa := ar.stage(unsafe.Pointer(&a[0]), int64(count*128)*4, true, false)
		pb := ar.stage(unsafe.Pointer(&bm[0]), int64(count*64)*4, true, false)
		b.d.launch("mma_bf16_probe", (count+warpsPerBlock-1)/warpsPerBlock, ptr(ar.out(d, count*128)), ptr(pa), ptr(pb),
			ptr(ar.in(c, count*128)), i64(count))
	})
}

// warpsPerBlock is BLOCK/32 of kernels/common.cuh.
const warpsPerBlock = blockSize / 32
