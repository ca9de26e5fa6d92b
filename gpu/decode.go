package gpu

// DecodeFused is implemented by a backend with fused ops for generation
// (gpu/model's Generator): one product for a layer's q, k and v (their
// weights are one [QD+2KD, C] block of the parameters, q_proj, k_proj and
// v_proj in turn) followed by one op for the biases, RoPE and the KV-cache
// writes, and one product for gate and up (one [2F, C] block) followed by
// SwiGLU over its rows. The generator uses them when the backend has them
// and DecodeFusion reports true, on the layers without LoRA adapters on
// those products (with adapters on q, k or v, the products and adapters
// apart, then RopeCacheForward); otherwise it runs the separate ops. The CUDA backend
// implements it (fewer launches per decoded token); gpu/cpu does not, so
// the CPU path is unchanged.
//
// Shapes as Backend's; QD = NH*HD, KD = NKV*HD.
type DecodeFused interface {
	// DecodeFusion reports whether the generator should use these ops.
	DecodeFusion() bool
	// QKVRopeCacheForward: qkv [N, QD+2KD] holds each token's q | k | v
	// products without their biases, bias [QD+2KD] (or nil) their biases.
	// q [N, QD] = RoPE(q + bq) at pos[n]; kcache[rows[n], :] = RoPE(k + bk)
	// and vcache[rows[n], :] = v + bv, kcache and vcache [*, KD]: what
	// adding each bias, RopeQKForward and two ScatterRows give.
	QKVRopeCacheForward(q, kcache, vcache, qkv, bias []float32, pos, rows []int32, cos, sin []float32,
		N, NH, NKV, HD int, layout RopeLayout)
	// RopeCacheForward: q [N, QD] rotated in place at pos[n];
	// kcache[rows[n], :] = RoPE(k) and vcache[rows[n], :] = v, k and v
	// [N, KD] (k itself unchanged): what RopeQKForward and two ScatterRows
	// give to q and the caches. For layers whose q, k, v products run
	// apart (LoRA adapters on them).
	RopeCacheForward(q, kcache, vcache, k, v []float32, pos, rows []int32, cos, sin []float32,
		N, NH, NKV, HD int, layout RopeLayout)
	// SwiGLURowsForward: out [N, F] = silu(gate) * up, gu [N, 2F] holding
	// each token's gate | up: SwiGLUForward of the two halves.
	SwiGLURowsForward(out, gu []float32, N, F int)
}

// DecodeFusedOps returns be's fused generation ops, or nil when be has none
// or has them switched off (see DecodeFused).
func DecodeFusedOps(be Backend) DecodeFused {
	if f, ok := be.(DecodeFused); ok && f.DecodeFusion() {
		return f
	}
	return nil
}

// DecodeGraph is implemented by a backend that can run the ops of a decode
// step as one graph (the CUDA backend: a CUDA graph, one launch per step
// where the ops would queue a few hundred launches and products). The
// generator (gpu/model) brackets the ops of a step whose rows all decode
// (no prompt token), from the embedding to the logits, with
// BeginDecodeGraph and EndDecodeGraph, key naming the step's shape (the
// generator and the batch); the step's inputs (tokens, positions, cache
// rows) are uploaded into the generator's tensors before Begin, and the
// sampling runs after End. Between the two, the ops are called as always
// and must not read tensors back to the host; the backend decides whether
// they run one by one or as a graph, and a replay must give what they
// would have given. gpu/cpu does not implement it, so the CPU path is
// unchanged.
type DecodeGraph interface {
	// DecodeGraphs reports whether the generator should mark its steps.
	DecodeGraphs() bool
	BeginDecodeGraph(key uint64)
	EndDecodeGraph()
}

// DecodeGraphOps returns be's decode graphs, or nil when be has none or
// has them switched off (see DecodeGraph).
func DecodeGraphOps(be Backend) DecodeGraph {
	if g, ok := be.(DecodeGraph); ok && g.DecodeGraphs() {
		return g
	}
	return nil
}

// DecodeOverlap is implemented by a backend whose ops are queued on a
// device (the CUDA backend), so that the generator can queue a decode step
// before it reads the previous step's samples: the step's tokens are the
// previous samples, copied on the device, and the host's work between
// steps (the samples' bookkeeping, stop tokens, finished requests) runs
// while the device computes the next one. A request that stopped computes
// one token more, which is dropped; every request's tokens and log-probs
// are those of the steps run one after another. gpu/cpu does not
// implement it. See docs/gpu.md, "Overlapping the host's work with the
// device's".
type DecodeOverlap interface {
	// DecodeOverlap reports whether the generator should overlap its steps.
	DecodeOverlap() bool
	// DownloadQueued queues copies of the tensors ids [n] and logp [n]
	// (nil: none) to the host behind the work queued so far and returns
	// their ticket at once. A few may be in flight (the CUDA backend: 8).
	DownloadQueued(ids []int32, logp []float32, n int) (ticket int)
	// WaitDownload waits for the copies of ticket alone (the work queued
	// after them runs on) and fills the host slices ids and logp.
	WaitDownload(ticket int, ids []int32, logp []float32)
	// CopyInt32 copies the tensor src into dst (queued).
	CopyInt32(dst, src []int32)
}

// DecodeOverlapOps returns be's overlap scheduling, or nil when be has
// none or has it switched off (see DecodeOverlap).
func DecodeOverlapOps(be Backend) DecodeOverlap {
	if o, ok := be.(DecodeOverlap); ok && o.DecodeOverlap() {
		return o
	}
	return nil
}
