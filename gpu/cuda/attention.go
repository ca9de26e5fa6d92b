package cuda

// Causal grouped-query attention, for training and against the KV cache (kernels/attention.cuh).
// CPU reference: gpu/cpu; the checks are in attention_check.go.

import (
	"fmt"
	"math"
)

// AttentionForward is causal GQA attention, within a sliding window when
// window > 0. The probabilities live in device memory; scratch is not used.
func (b *Backend) AttentionForward(out, scratch []float32, q, k, v []float32, B, T, NH, NKV, HD, window int) {
	scale := float32(1 / math.Sqrt(float64(HD)))
	b.d.run("AttentionForward", func(a *arena) {
		pq, pk, pv := a.in(q, B*T*NH*HD), a.in(k, B*T*NKV*HD), a.in(v, B*T*NKV*HD)
		po := a.out(out, B*T*NH*HD)
		pp := a.alloc(int64(NH*T*T) * 4)
		for s := 0; s < B; s++ {
			b.d.launch("attention_probs", NH*T, ptr(pp), ptr(pq), ptr(pk), i64(s), i64(T), i64(NH), i64(NKV), i64(HD), f32(scale),
				i64(window))
			b.d.launch("attention_out", gridFor(T*NH*HD), ptr(po), ptr(pp), ptr(pv), i64(s), i64(T), i64(NH), i64(NKV), i64(HD),
				i64(window))
		}
	})
}

// AttentionBackward recomputes the probabilities per sequence, then dq, dk, dv.
func (b *Backend) AttentionBackward(dq, dk, dv, scratch []float32, dout, q, k, v []float32, B, T, NH, NKV, HD, window int) {
	scale := float32(1 / math.Sqrt(float64(HD)))
	b.d.run("AttentionBackward", func(a *arena) {
		pq, pk, pv := a.in(q, B*T*NH*HD), a.in(k, B*T*NKV*HD), a.in(v, B*T*NKV*HD)
		pdo := a.in(dout, B*T*NH*HD)
		pdq, pdk, pdv := a.out(dq, B*T*NH*HD), a.out(dk, B*T*NKV*HD), a.out(dv, B*T*NKV*HD)
		pp := a.alloc(int64(NH*T*T) * 4)
		pds := a.alloc(int64(NH*T*T) * 4)
		for s := 0; s < B; s++ {
			b.d.launch("attention_probs", NH*T, ptr(pp), ptr(pq), ptr(pk), i64(s), i64(T), i64(NH), i64(NKV), i64(HD), f32(scale),
				i64(window))
			b.d.launch("attention_dscores", NH*T, ptr(pds), ptr(pp), ptr(pdo), ptr(pv), i64(s), i64(T), i64(NH), i64(NKV), i64(HD),
				f32(scale), i64(window))
			b.d.launch("attention_dq", gridFor(T*NH*HD), ptr(pdq), ptr(pds), ptr(pk), i64(s), i64(T), i64(NH), i64(NKV), i64(HD),
				i64(window))
			b.d.launch("attention_dkv", gridFor(T*NKV*HD), ptr(pdk), ptr(pdv), ptr(pds), ptr(pp), ptr(pq), ptr(pdo),
				i64(s), i64(T), i64(NH), i64(NKV), i64(HD), i64(window))
		}
	})
}

// AttentionCachedForward attends N new tokens to the KV cache [S*rows,NKV,HD]
// (slots of rows rows, position j of a slot in its row j%rows: a full
// cache, or a sliding window's rolling one) by flash-decoding
// (attentionCachedSplit).
func (b *Backend) AttentionCachedForward(out, q, kcache, vcache []float32, slot, pos []int32, N, NH, NKV, HD, rows, window int) {
	if N == 0 {
		return
	}
	if rows <= 0 || window < 0 {
		panic(&Error{"AttentionCachedForward", fmt.Errorf("%d rows a slot, window %d", rows, window)})
	}
	scale := float32(1 / math.Sqrt(float64(HD)))
	span := cachedSpan(rows, window) // the scores' row stride: positions are not read on the host
	b.d.run("AttentionCachedForward", func(a *arena) {
		b.attentionCachedSplit(a, out, q, kcache, vcache, slot, pos, N, NH, NKV, HD, rows, span, scale)
	})
}

// cachedSpan is the most positions a token sees in a cache of rows rows a
// slot: the window (window > 0), at most rows, or rows for full attention.
// The decode kernels attend to the last min(pos+1, span) positions of a
// token (attention.cuh, ds_positions), which for a window is gpu.Backend's
// positions pos-window+1 .. pos, and for a full cache (rows above every
// position) 0 .. pos; a slot of fewer rows than that (a caller's error,
// which gpu/cpu refuses) still reads only its own rows.
func cachedSpan(rows, window int) int {
	if window > 0 && window < rows {
		return window
	}
	return rows
}

// decodeChunkMin and decodeChunkMax bound the positions of one chunk of
// attention_cached_split (DS_CHUNK_MAX in kernels/attention.cuh: its scores
// sit in shared memory); a chunk is a multiple of decodeChunkStep positions
// (the key rows a warp takes at once at HD 64), which keeps the grid within
// a third of its aim. decodeBlocksPerSM is the grid it aims for: two blocks
// on every multiprocessor.
const (
	decodeChunkMin    = 8
	decodeChunkMax    = 1024
	decodeChunkStep   = 4
	decodeBlocksPerSM = 2
)

// decodeHeadsMax and decodeQMax are attention.cuh's DS_HEADS and DS_QMAX:
// the most query heads one block of attention_cached_split serves (a warp
// each for the softmax) and the most floats of their queries (heads x HD,
// in shared memory).
const (
	decodeHeadsMax = 8
	decodeQMax     = 2048
)

// decodeGroupHeads is the query heads GB a block of attention_cached_split
// takes from a KV head's group of G: the whole group where it fits
// (decodeHeadsMax heads, decodeQMax floats of queries), else the group cut
// into ceil(G/GB) near-equal parts (17 heads: 6, 6, 5). Its blocks per KV
// head are ceil(G/GB). It panics for a head of more than decodeQMax
// dimensions.
func decodeGroupHeads(G, HD int) (GB int) {
	most := min(decodeHeadsMax, decodeQMax/max(1, HD))
	if most < 1 {
		panic(fmt.Sprintf("cuda: cached attention: a head of %d dimensions, above %d", HD, decodeQMax))
	}
	parts := (G + most - 1) / most
	return (G + parts - 1) / parts
}

// decodeRows is the blocks of one chunk of attention_cached_split: one
// per (token, KV head, part of its group of query heads).
func decodeRows(N, NH, NKV, HD int) int {
	G := NH / NKV
	GB := decodeGroupHeads(G, HD)
	return N * NKV * ((G + GB - 1) / GB)
}

// decodeSMs is the multiprocessor count assumed where the driver does not
// report one (the emulator): an H100's or H200's 132.
const decodeSMs = 132

// decodeChunks chooses the chunks of attention_cached_split for rows
// blocks a chunk (decodeRows) over at most maxT positions a token sees
// (cachedSpan) on a GPU of sms multiprocessors: enough chunks per row that
// rows*chunks reaches decodeBlocksPerSM*sms blocks, each of at least
// decodeChunkMin positions (so a short cache or a full grid gives one
// chunk) and at most decodeChunkMax. The most positions a token of a
// launch can see is maxT: the positions are on the device, and the blocks
// of chunks past a token's positions return at once. chunks*L >= maxT.
func decodeChunks(rows, maxT, sms int) (L, chunks int) {
	want := max(1, (decodeBlocksPerSM*max(1, sms)+rows-1)/max(1, rows)) // chunks per row
	L = (maxT + want - 1) / want
	L = (L + decodeChunkStep - 1) / decodeChunkStep * decodeChunkStep
	L = min(max(L, decodeChunkMin), decodeChunkMax)
	return L, (maxT + L - 1) / L
}

// attentionSMs is the multiprocessor count of the device, decodeSMs
// where its driver does not say.
func (d *device) attentionSMs() int {
	drv := d.drv
	if p, ok := drv.(profDriver); ok {
		drv = p.driver
	}
	if c, ok := drv.(interface{ attentionSMs() int }); ok {
		if n := c.attentionSMs(); n > 0 {
			return n
		}
	}
	return decodeSMs
}

// attentionCachedSplit is AttentionCachedForward by flash-decoding (the
// default since an H100 proof measured a decode at batch 1 1.34x faster
// with it, at batch 64 1.10x, when its blocks took one query head each):
// attention_cached_split (one block per token, KV head, part of its group
// of query heads and chunk) writes each chunk's
// partial softmax to scratch of the op's arena, attention_cached_combine
// rescales and sums them (not launched with one chunk, where the split
// kernel writes out itself). The chunks cut the span positions a token
// sees at most (cachedSpan); the kernels read slots of rows rows. Nothing
// is read on the host.
func (b *Backend) attentionCachedSplit(a *arena, out, q, kcache, vcache []float32, slot, pos []int32, N, NH, NKV, HD, rows, span int,
	scale float32) {
	qrows := N * NH
	GB := decodeGroupHeads(NH/NKV, HD)
	blocks := decodeRows(N, NH, NKV, HD)
	L, chunks := decodeChunks(blocks, span, b.d.attentionSMs())
	po, pq := a.out(out, qrows*HD), a.in(q, qrows*HD)
	pk, pv := a.in(kcache, len(kcache)), a.in(vcache, len(vcache))
	pslot, ppos := a.ints(slot, N), a.ints(pos, N)
	var part, ml dptr
	if chunks > 1 {
		part, ml = a.alloc(int64(qrows*chunks*HD)*4), a.alloc(int64(qrows*chunks*2)*4)
	}
	b.d.launch("attention_cached_split", blocks*chunks, ptr(po), ptr(part), ptr(ml), ptr(pq), ptr(pk), ptr(pv),
		ptr(pslot), ptr(ppos), i64(N), i64(NH), i64(NKV), i64(HD), i64(rows), i64(span), i64(L), i64(chunks), i64(GB),
		f32(scale))
	if chunks > 1 {
		b.d.launch("attention_cached_combine", qrows, ptr(po), ptr(part), ptr(ml), ptr(ppos), i64(NH), i64(HD), i64(L), i64(chunks),
			i64(span))
	}
}
