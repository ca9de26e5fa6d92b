package gpu

// RopeLayout says which pairs of a head's channels RoPE rotates together.
type RopeLayout int

const (
	// RopeHalf is the Hugging Face layout (rotate_half): channel i pairs with
	// channel i+D/2, for i < D/2.
	RopeHalf RopeLayout = iota
	// RopePairs is the original Meta / GGUF llama layout: channel 2i pairs
	// with channel 2i+1.
	RopePairs
)

// String names the layout.
func (l RopeLayout) String() string {
	switch l {
	case RopeHalf:
		return "rotate-half"
	case RopePairs:
		return "adjacent-pairs"
	}
	return "unknown"
}

// FusedAttentionOnly is implemented by a backend whose padded attention
// (AttentionForward/Backward, an [NH,T,T] scratch per sequence) should not
// run in training: gpu/model then runs a right-padded batch of B rows of T
// tokens through AttentionVarlenForward/Backward as B sequences of length
// T (the same attention, to rounding: each row attends to itself causally,
// padding included, as in the padded ops). The CUDA backend implements it;
// gpu/cpu does not, so the CPU path is unchanged.
type FusedAttentionOnly interface {
	FusedAttentionOnly() bool
}

// PrefersFusedAttention reports whether gpu/model should run padded batches
// through the fused (varlen) attention ops on be (see FusedAttentionOnly).
func PrefersFusedAttention(be Backend) bool {
	f, ok := be.(FusedAttentionOnly)
	return ok && f.FusedAttentionOnly()
}

// ClippedAdamW is implemented by a backend that clips the gradients'
// global norm inside AdamW's pass over them: ClipAdamW leaves params, m
// and v (and anything the backend keeps of them) as ClipGradNorm(grads,
// maxNorm) then AdamW would, bit for bit, and returns the norm before
// clipping; grads are left unscaled. gpu/model's AdamW.Update uses it
// where the backend has it (the CUDA backend: no pass over the gradients
// to scale them, no synchronisation between the norm and the update);
// gpu/cpu does not.
type ClippedAdamW interface {
	ClipAdamW(params, grads, m, v []float32, step int, lr, beta1, beta2, eps, weightDecay, maxNorm float32) float64
}

// Backend is the op set of a decoder's training step (Llama, Qwen2, Qwen3,
// Mistral, Gemma 3), forward and backward,
// plus the optimizer. See the package documentation for the conventions on
// overwriting and accumulating outputs.
//
// Shape letters:
//
//	N  tokens in the flattened batch (B*T)
//	B  batch, T time (sequence length)
//	C  channels (hidden size), OC output channels
//	V  vocabulary size
//	NH query heads, NKV key/value heads (NH % NKV == 0), HD head dimension
//	F  feed-forward (intermediate) size
//	P  rows of the RoPE tables (max positions)
type Backend interface {
	// Name identifies the backend, for logs and benchmarks.
	Name() string

	Memory

	// GatherRows copies rows of a matrix: out[m,:] = inp[rows[m],:].
	// out [M,C], inp [R,C], rows [M] (each < R).
	GatherRows(out, inp []float32, rows []int32, M, C int)
	// ScatterRows writes rows of a matrix: out[rows[m],:] = inp[m,:], the
	// other rows of out unchanged. out [R,C], inp [M,C], rows [M] distinct.
	ScatterRows(out, inp []float32, rows []int32, M, C int)

	// Sgemm is row-major C = alpha*op(A)*op(B) + beta*C with op(A) [M,K],
	// op(B) [K,N], C [M,N]; op(X) is X^T when the matching trans flag is set.
	// lda, ldb, ldc are the row strides of A, B, C as stored.
	Sgemm(transA, transB bool, M, N, K int, alpha float32, A []float32, lda int,
		B []float32, ldb int, beta float32, C []float32, ldc int)

	// EmbeddingForward gathers rows: out[n,:] = wte[tokens[n],:].
	// out [N,C], tokens [N], wte [V,C].
	EmbeddingForward(out []float32, tokens []int32, wte []float32, N, C int)
	// EmbeddingBackward scatter-adds: dwte[tokens[n],:] += dout[n,:].
	EmbeddingBackward(dwte []float32, dout []float32, tokens []int32, N, C int)

	// RMSNormForward: out = inp * rstd * weight, rstd = 1/sqrt(mean(inp^2)+eps)
	// per row. out [N,C], rstd [N] (saved for the backward), inp [N,C], weight [C].
	RMSNormForward(out, rstd []float32, inp, weight []float32, N, C int, eps float32)
	// RMSNormBackward: dinp [N,C] overwritten, dweight [C] accumulated.
	RMSNormBackward(dinp, dweight []float32, dout, inp, weight, rstd []float32, N, C int)

	// ResidualRMSNormForward is ResidualForward and then RMSNormForward of
	// its result in one pass: res = a + b, out = res * rstd * weight,
	// rstd = 1/sqrt(mean(res^2)+eps) per row. res [N,C] (may alias a or b),
	// out [N,C], rstd [N], a, b [N,C], weight [C]. It reads a and b once and
	// writes res and out once, where the two ops read res back.
	ResidualRMSNormForward(res, out, rstd []float32, a, b, weight []float32, N, C int, eps float32)
	// ResidualRMSNormBackward is the backward of a norm whose input res is on
	// the residual stream: dres [N,C] += the norm's input gradient for the
	// output gradient dout + dout2 (dout2 [N,C] or nil: the norm's output
	// feeds several products, whose input gradients are summed here),
	// dweight [C] accumulated. It replaces adding dout2 into dout, an
	// RMSNormBackward into scratch and adding that into dres: three passes.
	ResidualRMSNormBackward(dres, dweight []float32, dout, dout2, res, weight, rstd []float32, N, C int)

	// MatmulForward: out = inp weight^T + bias. out [N,OC], inp [N,C],
	// weight [OC,C], bias [OC] or nil.
	MatmulForward(out, inp, weight, bias []float32, N, C, OC int)
	// MatmulBackward: dinp = dout weight (overwritten, or with accumulate
	// dinp += dout weight; skipped if dinp is nil), dweight += dout^T inp
	// (skipped if dweight is nil; inp is read only for it), dbias += column
	// sums of dout (if dbias is not nil). dinp [N,C],
	// dout [N,OC]. accumulate sums the input gradients of several products
	// that read the same input (q/k/v, gate/up, a LoRA adapter beside its
	// base) in the product itself (beta 1), where a separate add would need
	// a scratch tensor and a pass over it.
	MatmulBackward(dinp, dweight, dbias []float32, dout, inp, weight []float32, N, C, OC int, accumulate bool)

	// RopeForward rotates each head of each token by its position:
	// out [N,H,HD], inp [N,H,HD] (out may alias inp), pos [N] row indexes into
	// cos/sin [P,HD/2], which hold cos and sin of pos*invfreq[i].
	RopeForward(out, inp []float32, pos []int32, cos, sin []float32, N, H, HD int, layout RopeLayout)
	// RopeBackward rotates the gradient back (by -theta). dinp may alias dout.
	RopeBackward(dinp, dout []float32, pos []int32, cos, sin []float32, N, H, HD int, layout RopeLayout)
	// RopeQKForward is RopeForward of the queries q [N,NH,HD] and the keys
	// k [N,NKV,HD] of the same tokens, in place, in one pass (one launch).
	RopeQKForward(q, k []float32, pos []int32, cos, sin []float32, N, NH, NKV, HD int, layout RopeLayout)
	// RopeQKBackward is RopeBackward of dq [N,NH,HD] and dk [N,NKV,HD], in
	// place, in one pass.
	RopeQKBackward(dq, dk []float32, pos []int32, cos, sin []float32, N, NH, NKV, HD int, layout RopeLayout)

	// AttentionForward is causal grouped-query softmax attention over each
	// sequence of the batch: query head h reads key/value head h/(NH/NKV).
	// out [B,T,NH,HD], q [B,T,NH,HD], k, v [B,T,NKV,HD]; scores are scaled by
	// 1/sqrt(HD). window > 0 is sliding-window attention: the query at
	// position t sees the keys at positions t-window+1 .. t (transformers'
	// sliding_window); 0 sees every earlier position. Nothing is saved: the
	// backward recomputes the probabilities, so activation memory stays
	// linear in T. scratch needs NH*T*T floats.
	AttentionForward(out, scratch []float32, q, k, v []float32, B, T, NH, NKV, HD, window int)
	// AttentionBackward: dq [B,T,NH,HD], dk, dv [B,T,NKV,HD] overwritten;
	// scratch needs 2*NH*T*T floats. window as the forward's.
	AttentionBackward(dq, dk, dv, scratch []float32, dout, q, k, v []float32, B, T, NH, NKV, HD, window int)

	// AttentionCachedForward is attention of N new tokens against a key/value
	// cache, for generation: token n belongs to cache slot slot[n] at position
	// pos[n] and attends to positions lo..pos[n] of that slot, lo = 0, or
	// pos[n]-window+1 (at least 0) with window > 0 (its own key and value
	// must already be written there). Each slot holds rows rows: position j
	// sits in row slot*rows + j%rows, so a slot of rows >= window + the
	// tokens a forward writes to it is a rolling window's cache, and one of
	// rows > every position a full one. out [N,NH,HD], q [N,NH,HD],
	// kcache, vcache [S,rows,NKV,HD].
	AttentionCachedForward(out, q, kcache, vcache []float32, slot, pos []int32, N, NH, NKV, HD, rows, window int)

	// AttentionVarlenForward is causal grouped-query attention over S
	// sequences packed end to end, with no padding: sequence s is the rows
	// cuSeqlens[s] .. cuSeqlens[s+1]-1 of q, k, v and out, attends only to
	// itself, and its positions start at 0 (see ValidateSeqlens for what
	// cuSeqlens [S+1] must hold; no sequence is longer than maxT).
	// out [N,NH,HD], q [N,NH,HD], k, v [N,NKV,HD]; lse [N,NH] gets the
	// log-sum-exp of each query row's scaled scores, which the backward
	// reads. On each sequence the results are those of AttentionForward on
	// that sequence alone (B 1, T its length, the same window), to float
	// rounding.
	AttentionVarlenForward(out, lse []float32, q, k, v []float32, cuSeqlens []int32, S, N, maxT, NH, NKV, HD, window int)
	// AttentionVarlenBackward: dq [N,NH,HD], dk, dv [N,NKV,HD] overwritten,
	// from dout [N,NH,HD] and the forward's inputs, out and lse.
	AttentionVarlenBackward(dq, dk, dv []float32, dout, out, lse, q, k, v []float32, cuSeqlens []int32,
		S, N, maxT, NH, NKV, HD, window int)

	// SwiGLUForward: out = silu(gate) * up, all [N*F].
	SwiGLUForward(out, gate, up []float32, n int)
	// SwiGLUBackward: dgate, dup [n] overwritten.
	SwiGLUBackward(dgate, dup []float32, dout, gate, up []float32, n int)
	// SwiGLUBackwardH is SwiGLUBackward that also writes h [n] = silu(gate)
	// * up, what SwiGLUForward writes (bit for bit), in the same pass over
	// gate and up: the training step's backward, which does not keep h,
	// needs it after dout (the down product's weight gradient and its LoRA
	// adapter's A gradient) and so recomputes it there without a pass of
	// its own (SwiGLURecompute). h must not alias dout, gate or up.
	SwiGLUBackwardH(dgate, dup, h []float32, dout, gate, up []float32, n int)

	// GeGLUForward: out = gelu_tanh(gate) * up, all [n], with PyTorch's
	// tanh approximation gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x +
	// 0.044715 x^3))) (transformers' gelu_pytorch_tanh: Gemma's MLP). out
	// may alias gate or up.
	GeGLUForward(out, gate, up []float32, n int)
	// GeGLUBackwardH: dgate, dup [n] overwritten from dout, and h [n] =
	// GeGLUForward's out (bit for bit), in one pass over gate and up (as
	// SwiGLUBackwardH). h must not alias dout, gate or up.
	GeGLUBackwardH(dgate, dup, h []float32, dout, gate, up []float32, n int)

	// ResidualForward: out = a + b, all [n]. out may alias a or b.
	ResidualForward(out, a, b []float32, n int)
	// ResidualBackward: da += dout, db += dout (the residual stream's gradient
	// flows to both branches).
	ResidualBackward(da, db []float32, dout []float32, n int)

	// SoftcapForward soft-caps x [n] in place: x = cap * tanh(x / cap) (Gemma's
	// final_logit_softcapping), cap > 0.
	SoftcapForward(x []float32, cap float32, n int)
	// SoftcapBackward turns dx [n], the gradient of the capped values y [n]
	// (SoftcapForward's output), into the gradient of its input, in place:
	// dx *= 1 - (y/cap)^2.
	SoftcapBackward(dx, y []float32, cap float32, n int)

	// LogprobForward turns logits [N,V] into, per row n, the log-probability of
	// targets[n] under log-softmax (logp [N]), the entropy of the softmax
	// (entropy [N]) and the log-sum-exp (lse [N], saved for the backward).
	// Rows with targets[n] < 0 get logp 0 (entropy is still computed).
	LogprobForward(logp, entropy, lse []float32, logits []float32, targets []int32, N, V int)
	// LogprobBackward: dlogits [N,V] (overwritten; may alias logits) from the
	// gradients of logp and entropy: dlogp*(onehot(target) - p) - dentropy*p*(log p + H).
	LogprobBackward(dlogits []float32, logits, lse, entropy []float32, targets []int32,
		dlogp, dentropy []float32, N, V int)

	// SampleTokens picks one token per row of logits [M,V] as params [M]
	// say (see SampleParams): the logits are divided by the temperature,
	// softmaxed, filtered to the top-k and then the top-p (nucleus) set, in
	// order of probability (ties: lower id first), and the token at the
	// row's U in the cumulative distribution of what is kept is chosen. It
	// writes tokens [M] and, unless logp is nil, logp [M]: each token's
	// log-probability before filtering, log_softmax(logits/temperature)
	// (log_softmax(logits) when greedy). tokens and logp are usually host
	// memory: a step downloads only them.
	SampleTokens(tokens []int32, logp []float32, logits []float32, params []SampleParams, M, V int)

	// SumSquares returns sum(x^2) in float64 (for the global gradient norm).
	SumSquares(x []float32) float64
	// Scale multiplies x by s in place (for gradient clipping).
	Scale(x []float32, s float32)
	// AdamW updates params in place from grads with the first and second
	// moments m, v, as torch.optim.AdamW does: decoupled weight decay
	// p -= lr*wd*p, then p -= lr * mhat/(sqrt(vhat)+eps) with the bias
	// corrections mhat = m/(1-beta1^step), vhat = v/(1-beta2^step).
	// step counts from 1.
	AdamW(params, grads, m, v []float32, step int, lr, beta1, beta2, eps, weightDecay float32)
}
