package model

import (
	"fmt"

	"github.com/rlhost/rlhost/gpu"
)

// Batch is a right-padded batch of token sequences for the training forward.
// Token n = b*T+t sits at position t of sequence b. Targets[n] is the token
// whose log-probability row n scores (usually Tokens[n+1]), or -1 where
// nothing is scored (padding, prompt tokens, the last token).
type Batch struct {
	B, T    int
	Tokens  []int32 // [B*T]
	Targets []int32 // [B*T]

	// ScoredOnly computes the lm_head logits, the log-softmax and the
	// entropy only at the rows whose target is >= 0: prompt and padding
	// rows need none, and the lm_head is the largest product of a step.
	// Acts.Logits then holds the scored rows packed in order (Acts.Scored
	// lists their row indexes), Logp and Entropy are 0 at the other rows,
	// and the backward ignores dlogp and dentropy there.
	ScoredOnly bool

	// Lengths, when set, makes the batch packed: B is 1, and sequences of
	// these lengths (each at least 1) lie end to end in the T rows (they sum
	// to T). Each sequence's positions start at 0 and its attention is
	// restricted to itself (gpu.Backend's AttentionVarlen ops), so it gets
	// what it would get alone in a padded batch, and no row is padding.
	// Packed batches need activations from NewPackedActs.
	Lengths []int
}

// layerActs are the activations one layer saves for its backward. The
// normalised inputs (x*rstd*w), silu(gate)*up and the attention
// probabilities are recomputed by the backward instead of being kept: they
// are cheap to recompute and would more than double activation memory.
type layerActs struct {
	x     []float32 // [N,C] layer input (residual stream)
	rstd1 []float32 // [N]
	q     []float32 // [N,NH*HD] after RoPE
	k, v  []float32 // [N,NKV*HD], k after RoPE
	atty  []float32 // [N,NH*HD] attention output before o_proj
	lse   []float32 // [N,NH] log-sum-exp of the attention scores (fused attention only)
	r2    []float32 // [N,C] x + o_proj(atty) (Sandwich: x + norm(o_proj(atty)))
	rstd2 []float32 // [N] of the MLP's input norm of r2
	gate  []float32 // [N,F]
	up    []float32 // [N,F]

	// QKNorm: q and k as the products give them, before their norms; the rstd of each head
	qn, kn       []float32 // [N,NH*HD], [N,NKV*HD]
	rstdQ, rstdK []float32 // [N*NH], [N*NKV]
	// Sandwich: the attention's and the MLP's outputs before their norms
	ao, mo       []float32 // [N,C]
	rstdA, rstdM []float32 // [N]
}

// Acts holds the activations of one training forward and the scratch of its
// backward, as tensors of the model's backend (allocated once, in llm.c's
// manner). It is sized for a number of rows (and, padded, a longest T for the
// attention scratch) and serves every batch that fits (Fits): each tensor is
// [N,...] row-major, so a smaller batch uses the first rows. Reuse it across
// steps; Free gives the tensors back. Logp, Entropy and Scored are host
// memory: the results the host reads; everything else stays on the backend.
type Acts struct {
	B, T    int // the batch of the last Forward (at first, the shape it was allocated for)
	rows    int // the rows every tensor holds: the most B*T it serves
	maxT    int // padded: the longest T the attention scratch holds
	posT    int // padded: a.pos holds n%posT for its rows
	be      gpu.Backend
	owned   []any // every tensor allocated, for Free
	layers  []layerActs
	xf      []float32 // [N,C] output of the last layer
	lnf     []float32 // [N,C]
	rstdf   []float32 // [N]
	Logits  []float32 // [N,V] (or [len(Scored),V] after a ScoredOnly batch); the backward overwrites it with dlogits; a backend tensor
	Scored  []int32   // host: after a ScoredOnly forward, the rows of Logits, in order; nil otherwise
	Logp    []float32 // host [N], a view of logpH
	Entropy []float32 // host [N], a view of entH
	logpH   []float32 // host [rows]
	entH    []float32 // host [rows]
	logp    []float32 // [N] on the backend
	ent     []float32 // [N] on the backend
	lse     []float32 // [N]
	pos     []int32   // [N]
	targets []int32   // [N]
	tokens  []int32   // [N]

	// a ScoredOnly forward packs its M scored rows here
	lnfS          []float32 // [M,C] rows of lnf
	targetsS      []int32   // [M]
	scoredD       []int32   // [M] Scored on the backend
	logpS, entS   []float32 // [M]
	dlogpS, dentS []float32 // [M] (backward)
	hostS         []float32 // host [M] staging of logpS, entS, dlogpS, dentS
	hostI         []int32   // host [M] staging of targetsS
	scoredBuf     []int32   // backs Scored, capacity N
	scoredOnly    bool      // the last forward was ScoredOnly

	// shared by every layer, forward and backward
	ln     []float32 // [N,C] a normalised input
	h      []float32 // [N,F] silu(gate)*up
	attBuf []float32 // [2,NH,T,T] attention scratch (padded attention only)

	// packed activations (NewPackedActs): the batch's sequences
	packed bool
	// fused: attention through AttentionVarlen* (packed activations, and
	// padded ones on a backend that prefers them: gpu.PrefersFusedAttention,
	// each row then one sequence of T tokens)
	fused  bool
	cu     []int32 // [rows+1] cumulative lengths on the backend (the first nseq+1 used)
	nseq   int     // sequences of the last forward
	maxLen int     // the longest of them
	cuB    int     // padded fused activations: the rows x T that cu holds (0: none yet)
	cuT    int
	posH   []int32 // host [rows] positions of the last forward

	lora     loraScratch          // the adapters' low-rank products
	loraU    [][numMods][]float32 // per layer and module: scale*(inp A^T) [N,R] kept for the backward
	normSink []float32            // [C] discarded norm-weight gradients of a frozen base

	// backward scratch
	dres, dln, dtmp []float32 // [N,C]
	dgate, dup, dh  []float32 // [N,F]
	dq, datty       []float32 // [N,NH*HD]
	dk, dv          []float32 // [N,NKV*HD]
	dkn             []float32 // [N,NKV*HD] the k product's gradient (QKNorm)
	dlogitsBuf      []float32 // [N,V] the logits' gradient before soft-capping (FinalSoftcap)
}

// NewActs allocates activations for a B x T batch on the model's backend;
// they serve any right-padded batch of at most B*T rows and T positions.
// Out of device memory panics with a *gpu.MemoryError naming the tensor.
func (m *Model) NewActs(B, T int) *Acts { return m.newActs(B, T, false) }

// NewPackedActs allocates activations for packed batches (see Batch.Lengths)
// of up to N rows: no [T,T] attention scratch, and per layer the attention's
// log-sum-exp [N,NH] for the backward.
func (m *Model) NewPackedActs(N int) *Acts { return m.newActs(1, N, true) }

// Fits reports whether a can run the batch b: a packed batch needs packed
// activations of at least its rows; a padded one padded activations of at
// least its rows whose attention scratch holds its T.
func (a *Acts) Fits(b Batch) bool {
	if (b.Lengths != nil) != a.packed {
		return false
	}
	return b.B*b.T <= a.rows && (a.packed || b.T <= a.maxT)
}

func (m *Model) newActs(B, T int, packed bool) *Acts {
	c, be := m.Config, m.be
	N := B * T
	a := &Acts{B: B, T: T, rows: N, maxT: T, posT: T, be: be, layers: make([]layerActs, c.L), packed: packed,
		fused: packed || gpu.PrefersFusedAttention(be)}
	f := func(name string, n int) []float32 {
		x := be.Alloc("activations: "+name, n)
		a.owned = append(a.owned, x)
		return x
	}
	ints := func(name string, n int) []int32 {
		x := be.AllocInt32("activations: "+name, n)
		a.owned = append(a.owned, x)
		return x
	}
	for l := range a.layers {
		a.layers[l] = layerActs{
			x: f("x", N*c.C), rstd1: f("rstd1", N),
			q: f("q", N*c.NH*c.HD), k: f("k", N*c.NKV*c.HD), v: f("v", N*c.NKV*c.HD),
			atty: f("attention output", N*c.NH*c.HD), r2: f("r2", N*c.C), rstd2: f("rstd2", N),
			gate: f("gate", N*c.F), up: f("up", N*c.F),
		}
		if a.fused {
			a.layers[l].lse = f("attention lse", N*c.NH)
		}
		if c.QKNorm {
			la := &a.layers[l]
			la.qn, la.kn = f("q before its norm", N*c.NH*c.HD), f("k before its norm", N*c.NKV*c.HD)
			la.rstdQ, la.rstdK = f("rstd of q", N*c.NH), f("rstd of k", N*c.NKV)
		}
		if c.Sandwich {
			la := &a.layers[l]
			la.ao, la.mo = f("attention output before its norm", N*c.C), f("MLP output before its norm", N*c.C)
			la.rstdA, la.rstdM = f("rstd of the attention output", N), f("rstd of the MLP output", N)
		}
	}
	if c.QKNorm {
		a.dkn = f("dk before its norm", N*c.NKV*c.HD)
	}
	if c.FinalSoftcap != 0 {
		a.dlogitsBuf = f("dlogits before soft-capping", N*c.V)
	}
	a.xf, a.lnf, a.rstdf = f("xf", N*c.C), f("lnf", N*c.C), f("rstdf", N)
	a.Logits, a.logp, a.ent, a.lse = f("logits", N*c.V), f("logp", N), f("entropy", N), f("lse", N)
	a.logpH, a.entH = make([]float32, N), make([]float32, N)
	a.Logp, a.Entropy = a.logpH, a.entH
	a.pos, a.targets, a.tokens = ints("positions", N), ints("targets", N), ints("tokens", N)
	a.lnfS, a.targetsS, a.scoredD = f("scored lnf", N*c.C), ints("scored targets", N), ints("scored rows", N)
	a.logpS, a.entS, a.dlogpS, a.dentS = f("scored logp", N), f("scored entropy", N), f("scored dlogp", N), f("scored dentropy", N)
	a.hostS, a.hostI = make([]float32, N), make([]int32, N)
	a.scoredBuf = make([]int32, 0, N)
	a.posH = make([]int32, N)
	for n := range a.posH {
		a.posH[n] = int32(n % T)
	}
	be.UploadInt32(a.pos, a.posH)
	a.dres, a.dln, a.dtmp = f("dres", N*c.C), f("dln", N*c.C), f("dtmp", N*c.C)
	a.dgate, a.dup, a.dh = f("dgate", N*c.F), f("dup", N*c.F), f("dh", N*c.F)
	a.dq, a.datty = f("dq", N*c.NH*c.HD), f("datty", N*c.NH*c.HD)
	a.dk, a.dv = f("dk", N*c.NKV*c.HD), f("dv", N*c.NKV*c.HD)
	a.ln, a.h = f("ln", N*c.C), f("h", N*c.F)
	if a.fused {
		a.cu = ints("cumulative lengths", N+1)
	} else {
		a.attBuf = f("attention scratch", 2*c.NH*T*T)
	}
	return a
}

// drop frees the tensor x now (an activation a caller does not need).
func (a *Acts) drop(x []float32) {
	for i, o := range a.owned {
		if y, ok := o.([]float32); ok && len(y) > 0 && len(x) > 0 && &y[0] == &x[0] {
			a.be.Free(x)
			a.owned = append(a.owned[:i], a.owned[i+1:]...)
			return
		}
	}
}

// Free gives the activations' tensors back to the backend; a is unusable
// afterwards.
func (a *Acts) Free() {
	for _, x := range a.owned {
		a.be.Free(x)
	}
	a.lora.free()
	a.owned = nil
	a.layers = nil
}

// checkBatch validates a batch against the model and the activations.
func (m *Model) checkBatch(a *Acts, b Batch) error {
	N := b.B * b.T
	if (b.Lengths != nil) == a.packed && !a.Fits(b) {
		if a.packed {
			return fmt.Errorf("model: packed batch of %d rows, activations are for at most %d", b.T, a.rows)
		}
		return fmt.Errorf("model: batch is %dx%d, activations are for at most %d rows of at most %d positions", b.B, b.T, a.rows, a.maxT)
	}
	if len(b.Tokens) != N || len(b.Targets) != N {
		return fmt.Errorf("model: batch %dx%d has %d tokens and %d targets, want %d each", b.B, b.T, len(b.Tokens), len(b.Targets), N)
	}
	if b.T > m.Config.MaxPos && b.Lengths == nil {
		return fmt.Errorf("model: sequence length %d exceeds the %d positions of the RoPE tables", b.T, m.Config.MaxPos)
	}
	if b.Lengths != nil || a.packed {
		if b.Lengths == nil || !a.packed {
			return fmt.Errorf("model: packed batches (Batch.Lengths) and activations from NewPackedActs go together")
		}
		sum := 0
		for s, n := range b.Lengths {
			if n < 1 || n > m.Config.MaxPos {
				return fmt.Errorf("model: packed sequence %d has length %d, want 1..%d (the RoPE tables' positions)", s, n, m.Config.MaxPos)
			}
			sum += n
		}
		if b.B != 1 || sum != b.T {
			return fmt.Errorf("model: a packed batch is 1 x T with lengths summing to T; got %dx%d with lengths summing to %d", b.B, b.T, sum)
		}
	}
	for n := 0; n < N; n++ {
		if t := b.Tokens[n]; t < 0 || int(t) >= m.Config.V {
			return fmt.Errorf("model: token %d at batch row %d position %d is outside the vocabulary [0,%d)", t, n/b.T, n%b.T, m.Config.V)
		}
		if t := b.Targets[n]; t < -1 || int(t) >= m.Config.V {
			return fmt.Errorf("model: target %d at batch row %d position %d is outside the vocabulary [0,%d) and not -1", t, n/b.T, n%b.T, m.Config.V)
		}
	}
	return nil
}

// Forward runs the batch through the model and fills a.Logits [N,V],
// a.Logp [N] (log-probability of each target; 0 where the target is -1) and
// a.Entropy [N] (entropy of each position's next-token distribution); with
// b.ScoredOnly, only the rows that have a target (see Batch.ScoredOnly).
func (m *Model) Forward(a *Acts, b Batch) error {
	if err := m.forwardBody(a, b); err != nil {
		return err
	}
	be, c, N := m.be, m.Config, b.B*b.T
	a.scoredOnly = b.ScoredOnly
	a.Logp, a.Entropy = a.logpH[:N], a.entH[:N]
	if !b.ScoredOnly {
		a.Scored = nil
		be.MatmulForward(a.Logits, a.lnf, m.Params.LMHead, nil, N, c.C, c.V)
		if c.FinalSoftcap != 0 {
			be.SoftcapForward(a.Logits, c.FinalSoftcap, N*c.V)
		}
		be.LogprobForward(a.logp, a.ent, a.lse, a.Logits, a.targets, N, c.V)
		be.Download(a.Logp, a.logp[:N])
		be.Download(a.Entropy, a.ent[:N])
		return nil
	}
	// Pack the scored rows: lm_head and log-softmax on M <= N rows.
	a.Scored = a.scoredBuf[:0]
	for n, t := range b.Targets {
		if t >= 0 {
			a.hostI[len(a.Scored)] = t
			a.Scored = append(a.Scored, int32(n))
		}
	}
	M := len(a.Scored)
	clear(a.Logp)
	clear(a.Entropy)
	if M == 0 {
		return nil
	}
	be.UploadInt32(a.scoredD, a.Scored)
	be.UploadInt32(a.targetsS, a.hostI[:M])
	be.GatherRows(a.lnfS, a.lnf, a.scoredD, M, c.C)
	be.MatmulForward(a.Logits, a.lnfS, m.Params.LMHead, nil, M, c.C, c.V)
	if c.FinalSoftcap != 0 {
		be.SoftcapForward(a.Logits, c.FinalSoftcap, M*c.V)
	}
	be.LogprobForward(a.logpS, a.entS, a.lse, a.Logits, a.targetsS, M, c.V)
	be.Download(a.hostS[:M], a.logpS)
	for i, n := range a.Scored {
		a.Logp[n] = a.hostS[i]
	}
	be.Download(a.hostS[:M], a.entS)
	for i, n := range a.Scored {
		a.Entropy[n] = a.hostS[i]
	}
	return nil
}

// forwardBody runs the decoder up to the final norm: a.lnf [N,C] is the last
// hidden state (what a head reads).
func (m *Model) forwardBody(a *Acts, b Batch) error {
	if err := m.checkBatch(a, b); err != nil {
		return err
	}
	be, c, p := m.be, m.Config, m.Params
	B, T := b.B, b.T
	N := B * T
	QD, KD := c.NH*c.HD, c.NKV*c.HD
	a.B, a.T = B, T
	be.UploadInt32(a.tokens[:N], b.Tokens)
	be.UploadInt32(a.targets[:N], b.Targets)
	if a.packed {
		// positions restart at every sequence
		cu, maxLen := gpu.CuSeqlens(b.Lengths)
		for s, n := range b.Lengths {
			for t := 0; t < n; t++ {
				a.posH[int(cu[s])+t] = int32(t)
			}
		}
		a.nseq, a.maxLen = len(b.Lengths), maxLen
		be.UploadInt32(a.pos[:N], a.posH[:N])
		be.UploadInt32(a.cu[:a.nseq+1], cu)
	} else if a.posT != T {
		// row n = b*T+t is position t
		for n := range a.posH {
			a.posH[n] = int32(n % T)
		}
		be.UploadInt32(a.pos, a.posH)
		a.posT = T
	}
	if a.fused && !a.packed {
		// each row is one sequence of T tokens
		if a.cuB != B || a.cuT != T {
			cu := make([]int32, B+1)
			for s := range cu {
				cu[s] = int32(s * T)
			}
			be.UploadInt32(a.cu[:B+1], cu)
			a.cuB, a.cuT = B, T
		}
		a.nseq, a.maxLen = B, T
	}
	if len(a.loraU) != c.L {
		a.loraU = make([][numMods][]float32, c.L)
	}

	nw := m.normW()
	be.EmbeddingForward(a.layers[0].x, a.tokens, p.Embed, N, c.C)
	if c.EmbedScale != 0 {
		be.Scale(a.layers[0].x[:N*c.C], c.EmbedScale)
	}
	be.RMSNormForward(a.ln, a.layers[0].rstd1, a.layers[0].x, nw.ln1[0], N, c.C, c.Eps)
	for l := 0; l < c.L; l++ {
		// a.ln holds ln1(x) of this layer: the norm above, or the previous
		// layer's last op (the residual add fused with this norm)
		la, lp := &a.layers[l], &p.Layers[l]
		cos, sin := m.rope(l)
		// the q and k products, into qn and kn where their norms follow
		qp, kp := la.q, la.k
		if c.QKNorm {
			qp, kp = la.qn, la.kn
		}
		be.MatmulForward(qp, a.ln, lp.WQ, lp.BQ, N, c.C, QD)
		m.loraForward(&a.lora, &a.loraU[l][modQ], qp, a.ln, m.adapter(l, modQ), N)
		be.MatmulForward(kp, a.ln, lp.WK, lp.BK, N, c.C, KD)
		m.loraForward(&a.lora, &a.loraU[l][modK], kp, a.ln, m.adapter(l, modK), N)
		be.MatmulForward(la.v, a.ln, lp.WV, lp.BV, N, c.C, KD)
		m.loraForward(&a.lora, &a.loraU[l][modV], la.v, a.ln, m.adapter(l, modV), N)
		if c.QKNorm { // each head of q and k normalised over its HD channels
			be.RMSNormForward(la.q, la.rstdQ, la.qn, nw.qn[l], N*c.NH, c.HD, c.Eps)
			be.RMSNormForward(la.k, la.rstdK, la.kn, nw.kn[l], N*c.NKV, c.HD, c.Eps)
		}
		be.RopeQKForward(la.q, la.k, a.pos, cos, sin, N, c.NH, c.NKV, c.HD, m.Rope)
		if c.QScale != 0 && c.QScale != 1 {
			be.Scale(la.q[:N*QD], c.QScale)
		}
		win := c.Window(l)
		if a.fused {
			be.AttentionVarlenForward(la.atty, la.lse, la.q, la.k, la.v, a.cu[:a.nseq+1], a.nseq, N, a.maxLen, c.NH, c.NKV, c.HD, win)
		} else {
			be.AttentionForward(la.atty, a.attBuf, la.q, la.k, la.v, B, T, c.NH, c.NKV, c.HD, win)
		}
		if c.Sandwich { // o_proj into ao, its norm into dtmp, then r2 = x + dtmp and the MLP's input norm
			be.MatmulForward(la.ao, la.atty, lp.WO, nil, N, QD, c.C)
			m.loraForward(&a.lora, &a.loraU[l][modO], la.ao, la.atty, m.adapter(l, modO), N)
			be.RMSNormForward(a.dtmp, la.rstdA, la.ao, nw.ln2[l], N, c.C, c.Eps)
			be.ResidualRMSNormForward(la.r2, a.ln, la.rstd2, la.x, a.dtmp, nw.pre[l], N, c.C, c.Eps)
		} else {
			be.MatmulForward(a.dtmp, la.atty, lp.WO, nil, N, QD, c.C) // dtmp: scratch [N,C]
			m.loraForward(&a.lora, &a.loraU[l][modO], a.dtmp, la.atty, m.adapter(l, modO), N)
			be.ResidualRMSNormForward(la.r2, a.ln, la.rstd2, la.x, a.dtmp, nw.ln2[l], N, c.C, c.Eps)
		}
		be.MatmulForward(la.gate, a.ln, lp.WGate, nil, N, c.C, c.F)
		m.loraForward(&a.lora, &a.loraU[l][modGate], la.gate, a.ln, m.adapter(l, modGate), N)
		be.MatmulForward(la.up, a.ln, lp.WUp, nil, N, c.C, c.F)
		m.loraForward(&a.lora, &a.loraU[l][modUp], la.up, a.ln, m.adapter(l, modUp), N)
		m.gluForward(a.h, la.gate, la.up, N*c.F)
		mlpOut := a.dtmp
		if c.Sandwich {
			mlpOut = la.mo
		}
		be.MatmulForward(mlpOut, a.h, lp.WDown, nil, N, c.F, c.C)
		m.loraForward(&a.lora, &a.loraU[l][modDown], mlpOut, a.h, m.adapter(l, modDown), N)
		if c.Sandwich {
			be.RMSNormForward(a.dtmp, la.rstdM, la.mo, nw.post[l], N, c.C, c.Eps)
		}
		// the residual stream after this layer, and its norm: the next
		// layer's ln1, or the final norm
		if l+1 < c.L {
			nx := &a.layers[l+1]
			be.ResidualRMSNormForward(nx.x, a.ln, nx.rstd1, la.r2, a.dtmp, nw.ln1[l+1], N, c.C, c.Eps)
		} else {
			be.ResidualRMSNormForward(a.xf, a.lnf, a.rstdf, la.r2, a.dtmp, nw.final, N, c.C, c.Eps)
		}
	}
	return nil
}

// gluForward is the MLP's gated activation: out = act(gate) * up.
func (m *Model) gluForward(out, gate, up []float32, n int) {
	if m.Config.Act == GELUTanh {
		m.be.GeGLUForward(out, gate, up, n)
		return
	}
	m.be.SwiGLUForward(out, gate, up, n)
}

// Backward propagates dlogp [N] and dentropy [N] (the gradients of the loss
// with respect to a.Logp and a.Entropy of the last Forward) into m.Grads,
// accumulating. For the weighted log-prob loss sum_n -w[n]*logp[n], pass
// dlogp = -w. It overwrites a.Logits. With LoRA enabled the base is frozen:
// only the adapters' gradients (LoRA.Grad) are accumulated.
func (m *Model) Backward(a *Acts, dlogp, dentropy []float32) error {
	c, be, p := m.Config, m.be, m.Params
	B, T := a.B, a.T
	N := B * T
	if len(dlogp) != N || len(dentropy) != N {
		return fmt.Errorf("model: backward got %d dlogp and %d dentropy, want %d each", len(dlogp), len(dentropy), N)
	}

	// g holds the base gradients; with a frozen base its weight and bias
	// views are nil (MatmulBackward skips them) and its norm weights point at
	// a discarded scratch (the norms' backward always accumulates one).
	var g *Params
	frozen := m.lora != nil
	if frozen {
		if a.normSink == nil {
			a.normSink = be.Alloc("discarded norm-weight gradients", max(c.C, c.HD))
			a.owned = append(a.owned, a.normSink)
		}
		sink, sinkHD := a.normSink[:c.C], a.normSink[:c.HD]
		g = &Params{NormF: sink, Layers: make([]LayerParams, c.L)}
		for l := range g.Layers {
			gl := &g.Layers[l]
			gl.LN1, gl.LN2 = sink, sink
			if c.Sandwich {
				gl.PreFFN, gl.PostFFN = sink, sink
			}
			if c.QKNorm {
				gl.QNorm, gl.KNorm = sinkHD, sinkHD
			}
		}
	} else {
		m.EnableGrads()
		g = m.Grads
	}

	// with soft-capped logits the gradient goes to a buffer of its own: the
	// cap's derivative reads the capped logits
	dlogits := a.Logits
	if c.FinalSoftcap != 0 {
		dlogits = a.dlogitsBuf
	}
	if !a.scoredOnly {
		be.LogprobBackward(dlogits, a.Logits, a.lse, a.ent, a.targets, dlogp, dentropy, N, c.V)
		if c.FinalSoftcap != 0 {
			be.SoftcapBackward(dlogits, a.Logits, c.FinalSoftcap, N*c.V)
		}
		be.MatmulBackward(a.dln, g.LMHead, nil, dlogits, a.lnf, p.LMHead, N, c.C, c.V, false)
	} else {
		// the packed rows of a ScoredOnly forward; the others get no gradient
		M := len(a.Scored)
		be.Zero(a.dln[:N*c.C])
		if M > 0 {
			for i, n := range a.Scored {
				a.hostS[i] = dlogp[n]
			}
			be.Upload(a.dlogpS, a.hostS[:M])
			for i, n := range a.Scored {
				a.hostS[i] = dentropy[n]
			}
			be.Upload(a.dentS, a.hostS[:M])
			be.LogprobBackward(dlogits, a.Logits, a.lse, a.entS, a.targetsS, a.dlogpS, a.dentS, M, c.V)
			if c.FinalSoftcap != 0 {
				be.SoftcapBackward(dlogits[:M*c.V], a.Logits, c.FinalSoftcap, M*c.V)
			}
			be.MatmulBackward(a.dtmp, g.LMHead, nil, dlogits, a.lnfS, p.LMHead, M, c.C, c.V, false)
			be.ScatterRows(a.dln, a.dtmp, a.scoredD, M, c.C)
		}
	}
	m.backwardBody(a, g, frozen)
	return nil
}

// backwardBody propagates a.dln, the gradient of the last hidden state
// a.lnf [N,C], through the decoder into g (accumulating).
func (m *Model) backwardBody(a *Acts, g *Params, frozen bool) {
	c, be, p := m.Config, m.be, m.Params
	B, T := a.B, a.T
	N := B * T
	QD, KD := c.NH*c.HD, c.NKV*c.HD
	nw := m.normW()
	be.RMSNormBackward(a.dres, g.NormF, a.dln, a.xf, nw.final, a.rstdf, N, c.C)
	// a.dres is now the gradient of the residual stream after the last layer.
	for l := c.L - 1; l >= 0; l-- {
		la, lp, lg := &a.layers[l], &p.Layers[l], &g.Layers[l]
		cos, sin := m.rope(l)
		// out = r2 + down(h) (Sandwich: r2 + norm(down(h))): dres flows to r2
		// unchanged, and into the MLP as dmlp
		dmlp := a.dres
		if c.Sandwich { // a.dln is free until the gate and up products' input gradient
			be.RMSNormBackward(a.dln, lg.PostFFN, a.dres, la.mo, nw.post[l], la.rstdM, N, c.C)
			dmlp = a.dln
		}
		// the MLP's backward: dh, which does not read h, then h recomputed
		// in the pass that takes dgate and dup (one pass over gate and up),
		// then the gradients that read h
		ad := m.adapter(l, modDown)
		be.MatmulBackward(a.dh, nil, nil, dmlp, nil, lp.WDown, N, c.F, c.C, false)
		du := m.loraBackwardInput(&a.lora, a.dh, dmlp, a.loraU[l][modDown], ad, N)
		if c.Act == GELUTanh {
			be.GeGLUBackwardH(a.dgate, a.dup, a.h, a.dh, la.gate, la.up, N*c.F)
		} else {
			be.SwiGLUBackwardH(a.dgate, a.dup, a.h, a.dh, la.gate, la.up, N*c.F)
		}
		if lg.WDown != nil {
			be.MatmulBackward(nil, lg.WDown, nil, dmlp, a.h, lp.WDown, N, c.F, c.C, false)
		}
		m.loraBackwardA(du, a.h, ad, N)
		// the MLP's input norm of r2: ln2, or Sandwich's pre-feedforward norm
		mlpNorm, dMLPNorm := nw.ln2[l], lg.LN2
		if c.Sandwich {
			mlpNorm, dMLPNorm = nw.pre[l], lg.PreFFN
		}
		be.RMSNormForward(a.ln, la.rstd2, la.r2, mlpNorm, N, c.C, c.Eps) // recompute it
		// d ln2 = the gate and up products' input gradients, summed in a.dln
		// by the products themselves (accumulate), the adapters' too
		be.MatmulBackward(a.dln, lg.WGate, nil, a.dgate, a.ln, lp.WGate, N, c.C, c.F, false)
		m.loraBackward(&a.lora, a.dln, a.dgate, a.ln, a.loraU[l][modGate], m.adapter(l, modGate), N)
		be.MatmulBackward(a.dln, lg.WUp, nil, a.dup, a.ln, lp.WUp, N, c.C, c.F, true)
		m.loraBackward(&a.lora, a.dln, a.dup, a.ln, a.loraU[l][modUp], m.adapter(l, modUp), N)
		// a.dres += ln2's input gradient for d ln2 = a.dln: a.dres = d r2
		be.ResidualRMSNormBackward(a.dres, dMLPNorm, a.dln, nil, la.r2, mlpNorm, la.rstd2, N, c.C)
		// r2 = x + o_proj(atty) (Sandwich: x + norm(o_proj(atty))): dres flows
		// to x unchanged, and into attention as dattn
		dattn := a.dres
		if c.Sandwich {
			be.RMSNormBackward(a.dtmp, lg.LN2, a.dres, la.ao, nw.ln2[l], la.rstdA, N, c.C)
			dattn = a.dtmp
		}
		be.MatmulBackward(a.datty, lg.WO, nil, dattn, la.atty, lp.WO, N, QD, c.C, false)
		m.loraBackward(&a.lora, a.datty, dattn, la.atty, a.loraU[l][modO], m.adapter(l, modO), N)
		win := c.Window(l)
		if a.fused {
			be.AttentionVarlenBackward(a.dq, a.dk, a.dv, a.datty, la.atty, la.lse, la.q, la.k, la.v, a.cu[:a.nseq+1],
				a.nseq, N, a.maxLen, c.NH, c.NKV, c.HD, win)
		} else {
			be.AttentionBackward(a.dq, a.dk, a.dv, a.attBuf, a.datty, la.q, la.k, la.v, B, T, c.NH, c.NKV, c.HD, win)
		}
		if c.QScale != 0 && c.QScale != 1 {
			be.Scale(a.dq[:N*QD], c.QScale)
		}
		be.RopeQKBackward(a.dq, a.dk, a.pos, cos, sin, N, c.NH, c.NKV, c.HD, m.Rope)
		// the gradients of the q and k products: through their norms (into
		// a.datty, free since the attention's backward, and a.dkn)
		dq, dk := a.dq, a.dk
		if c.QKNorm {
			be.RMSNormBackward(a.datty, lg.QNorm, a.dq, la.qn, nw.qn[l], la.rstdQ, N*c.NH, c.HD)
			be.RMSNormBackward(a.dkn, lg.KNorm, a.dk, la.kn, nw.kn[l], la.rstdK, N*c.NKV, c.HD)
			dq, dk = a.datty, a.dkn
		}
		be.RMSNormForward(a.ln, la.rstd1, la.x, nw.ln1[l], N, c.C, c.Eps) // recompute ln1
		// d ln1 = the q, k and v products' input gradients, summed in a.dln
		// by the products (accumulate)
		be.MatmulBackward(a.dln, lg.WQ, lg.BQ, dq, a.ln, lp.WQ, N, c.C, QD, false)
		m.loraBackward(&a.lora, a.dln, dq, a.ln, a.loraU[l][modQ], m.adapter(l, modQ), N)
		be.MatmulBackward(a.dln, lg.WK, lg.BK, dk, a.ln, lp.WK, N, c.C, KD, true)
		m.loraBackward(&a.lora, a.dln, dk, a.ln, a.loraU[l][modK], m.adapter(l, modK), N)
		be.MatmulBackward(a.dln, lg.WV, lg.BV, a.dv, a.ln, lp.WV, N, c.C, KD, true)
		m.loraBackward(&a.lora, a.dln, a.dv, a.ln, a.loraU[l][modV], m.adapter(l, modV), N)
		// a.dres += ln1's input gradient for d ln1 = a.dln: a.dres = d x
		be.ResidualRMSNormBackward(a.dres, lg.LN1, a.dln, nil, la.x, nw.ln1[l], la.rstd1, N, c.C)
	}
	if !frozen {
		if c.EmbedScale != 0 {
			be.Scale(a.dres[:N*c.C], c.EmbedScale)
		}
		be.EmbeddingBackward(g.Embed, a.dres, a.tokens, N, c.C)
	}
}
