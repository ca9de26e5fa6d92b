package cuda

// Fused causal grouped-query attention over packed sequences, forward and
// backward, FlashAttention-2 style (kernels/flashattn.cuh): no [T,T] tensor
// is ever allocated. CPU reference: gpu/cpu (varlen.go); the checks are in
// flashattn_check.go.

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
)

// flashTile is FA_TILE of flashattn.cuh; flashMaxHD the largest head
// dimension of the fused attention (the _hd256 kernels, FA_NC256 chunks),
// flashMMAMaxHD that of the tensor-core kernels and of the fp32 kernels
// built with FA_NC chunks (FA_HDMAX).
const flashTile, flashMaxHD, flashMMAMaxHD = 64, 256, 128

// flashBlocks is the grid of a flash kernel: one block per (sequence, tile
// of the longest sequence, head); blocks past their sequence's end return.
func flashBlocks(S, maxT, heads int) int { return S * ((maxT + flashTile - 1) / flashTile) * heads }

// flashSeqlens checks the shape and, when cuSeqlens is host memory, its
// contents (a resident tensor cannot be read here), and returns it staged.
func (b *Backend) flashSeqlens(a *arena, cuSeqlens []int32, S, N, maxT, NH, NKV, HD, window int) dptr {
	if HD > flashMaxHD || HD <= 0 || NKV <= 0 || NH%NKV != 0 {
		panic(&Error{"", fmt.Errorf("head dimension %d (at most %d) or heads %d/%d not supported", HD, flashMaxHD, NH, NKV)})
	}
	if window < 0 {
		panic(&Error{"", fmt.Errorf("window %d", window)})
	}
	if len(cuSeqlens) < S+1 {
		panic(&Error{"", fmt.Errorf("cuSeqlens has %d entries for %d sequences", len(cuSeqlens), S)})
	}
	if _, resident := b.d.mem.owned(unsafe.Pointer(unsafe.SliceData(cuSeqlens)), int64(4*(S+1))); !resident {
		if err := gpu.ValidateSeqlens(cuSeqlens, S, N, maxT); err != nil {
			panic(&Error{"", err})
		}
	}
	return a.ints(cuSeqlens, S+1)
}

// AttentionVarlenForward: see gpu.Backend. One launch; lse [N,NH] is kept
// for the backward. With bf16 products the products run on the bf16 tensor
// cores (flashattn_mma.go); heads of more
// than 128 dimensions run the fp32 _hd256 kernels in every precision. A
// sliding window (window > 0) masks the scores outside it and skips the
// key tiles wholly outside it.
func (b *Backend) AttentionVarlenForward(out, lse []float32, q, k, v []float32, cuSeqlens []int32, S, N, maxT, NH, NKV, HD, window int) {
	if N == 0 {
		return
	}
	scale := float32(1 / math.Sqrt(float64(HD)))
	b.d.run("AttentionVarlenForward", func(a *arena) {
		cu := b.flashSeqlens(a, cuSeqlens, S, N, maxT, NH, NKV, HD, window)
		if HD <= flashMMAMaxHD && b.d.flashMMA() {
			b.flashForwardMMA(a, cu, out, lse, q, k, v, S, N, maxT, NH, NKV, HD, scale, window)
			return
		}
		po, pl := a.out(out, N*NH*HD), a.out(lse, N*NH)
		pq, pk, pv := a.in(q, N*NH*HD), a.in(k, N*NKV*HD), a.in(v, N*NKV*HD)
		if HD > flashMMAMaxHD {
			b.d.launch("flash_attention_forward_hd256", flashBlocks(S, maxT, NH), ptr(po), ptr(pl), ptr(pq), ptr(pk), ptr(pv),
				ptr(cu), i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale), i64(window))
			return
		}
		b.d.launch("flash_attention_forward", flashBlocks(S, maxT, NH), ptr(po), ptr(pl), ptr(pq), ptr(pk), ptr(pv),
			ptr(cu), i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale), i64(window))
	})
}

// AttentionVarlenBackward: see gpu.Backend. D = rowsum(dout*out) [N,NH]
// (arena scratch), then dk and dv (one block per key tile and key/value
// head, summing the group's query heads) and dq (one block per query tile
// and head): no atomics, so the result does not depend on scheduling.
// With bf16 products dk/dv and dq run on the bf16 tensor cores
// (flashattn_mma.go); heads of more than
// 128 dimensions run the fp32 _hd256 kernels in every precision.
func (b *Backend) AttentionVarlenBackward(dq, dk, dv []float32, dout, out, lse, q, k, v []float32, cuSeqlens []int32,
	S, N, maxT, NH, NKV, HD, window int) {
	if N == 0 {
		return
	}
	scale := float32(1 / math.Sqrt(float64(HD)))
	b.d.run("AttentionVarlenBackward", func(a *arena) {
		cu := b.flashSeqlens(a, cuSeqlens, S, N, maxT, NH, NKV, HD, window)
		pq, pk, pv := a.in(q, N*NH*HD), a.in(k, N*NKV*HD), a.in(v, N*NKV*HD)
		pdo, plse := a.in(dout, N*NH*HD), a.in(lse, N*NH)
		pD := a.alloc(int64(N*NH) * 4)
		b.d.launch("flash_attention_backward_dot", gridFor(N*NH), ptr(pD), ptr(pdo), ptr(a.in(out, N*NH*HD)), i64(N*NH), i64(HD))
		if HD <= flashMMAMaxHD && b.d.flashMMA() {
			b.flashBackwardMMA(a, cu, pq, pk, pv, pdo, plse, pD, dq, dk, dv, S, N, maxT, NH, NKV, HD, scale, window)
			return
		}
		pdk, pdv, pdq := a.out(dk, N*NKV*HD), a.out(dv, N*NKV*HD), a.out(dq, N*NH*HD)
		if HD > flashMMAMaxHD {
			b.d.launch("flash_attention_backward_dkv_hd256", flashBlocks(S, maxT, NKV), ptr(pdk), ptr(pdv),
				ptr(pq), ptr(pk), ptr(pv), ptr(pdo), ptr(plse), ptr(pD), ptr(cu),
				i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale), i64(window))
			b.d.launch("flash_attention_backward_dq_hd256", flashBlocks(S, maxT, NH), ptr(pdq),
				ptr(pq), ptr(pk), ptr(pv), ptr(pdo), ptr(plse), ptr(pD), ptr(cu),
				i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale), i64(window))
			return
		}
		b.d.launch("flash_attention_backward_dkv", flashBlocks(S, maxT, NKV), ptr(pdk), ptr(pdv),
			ptr(pq), ptr(pk), ptr(pv), ptr(pdo), ptr(plse), ptr(pD), ptr(cu),
			i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale), i64(window))
		b.d.launch("flash_attention_backward_dq", flashBlocks(S, maxT, NH), ptr(pdq),
			ptr(pq), ptr(pk), ptr(pv), ptr(pdo), ptr(plse), ptr(pD), ptr(cu),
			i64(S), i64(maxT), i64(NH), i64(NKV), i64(HD), f32(scale), i64(window))
	})
}

// flashMMA reports whether the fused attention runs on the bf16 tensor
// cores (flashattn_mma.go, the default since an H100 proof measured a
// training step 1.39x faster with them): where the products are bf16
// (SetPrecision(BF16), actor.dtype=bfloat16), so that a run in float32 or
// tfloat32 keeps its attention in fp32 as it asked.
func (d *device) flashMMA() bool { return d.prec == BF16 }
