package model

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
)

// SampleConfig controls how one request's tokens are chosen.
type SampleConfig struct {
	MaxTokens   int     // tokens to generate at most (> 0)
	Temperature float32 // <= 0: greedy (argmax)
	TopK        int     // keep the K most likely tokens; 0: all
	TopP        float32 // keep the smallest set with this much probability; 0 or 1: all
	Seed        uint64  // seeds this request's random stream (alone: the result does not depend on batching)
	StopTokens  []int32 // generation stops after one of these (it is returned)
	IgnoreEOS   bool    // do not stop at the model's eos ids (Config.EOSIDs)
	// Stop, when set, is called with the tokens generated so far after each
	// token; returning true ends the request (e.g. a stop string matched in
	// the decoded text).
	Stop func(generated []int32) bool
}

// Request is one prompt to continue.
type Request struct {
	Prompt []int32
	Sample SampleConfig
}

// Result is what a request generated.
type Result struct {
	Tokens []int32
	// Logprobs[i] is the log-probability of Tokens[i] under the distribution
	// it was sampled from before top-k/top-p filtering: log_softmax(logits /
	// temperature), or log_softmax(logits) when greedy.
	Logprobs     []float32
	FinishReason string // "stop" (stop token or Stop func) or "length"
}

// Generator runs batched generation with a KV cache of Slots sequences of up
// to MaxT tokens (prompt included). Requests beyond Slots wait; a finished
// request frees its slot for the next one (continuous batching), and the
// prompts of newly admitted requests are prefilled in the same forward as
// the decode tokens of the running ones. On a backend that runs decode
// steps as graphs (gpu.DecodeGraph) a decode step is padded to a few batch
// sizes (decodeBucket), the padding rows in a slot of their own.
type Generator struct {
	m           *Model
	Slots, MaxT int
	kc, vc      [][]float32 // per layer [Slots(+1), rows[l], NKV*HD], tensors of the backend
	// rows is each layer's cache rows a slot: MaxT, or for a sliding-window layer whose
	// window is short of MaxT a rolling window of window+chunk-1 rows (position j in row
	// j%rows), chunk being how many prompt tokens of a slot one forward runs at most
	rows    []int
	chunk   int     // 0: a prompt is prefilled in one forward
	perSlot []int32 // a forward's tokens per slot (the rolling caches' bound)
	// padSlot: the cache has one slot more, slot Slots, where the rows that pad a
	// decode step write (position 0 only), read by those rows alone
	padSlot bool
	// a padded decode step's tokens, slots, positions and rows (padDecode)
	padTok, padSl, padPos []int32
	padRows               []int

	// step buffers, tensors of the backend grown on demand
	x, ln, atty, tmp []float32 // [N,C] / [N,NH*HD]
	q, k, v          []float32
	gate, up         []float32 // [N,F]
	sel, lnsel       []float32 // [M,C] rows whose logits are needed
	logitsD          []float32 // [M,V]
	rstd             []float32
	tokD, posD       []int32   // [N] this step's tokens and positions
	slotD, rowD      []int32   // [N] their slots, and rows slot*MaxT+pos of the KV cache
	ringD            []int32   // [N] their rows slot*rows+pos%rows of the rolling caches (nil: none)
	gu2              []float32 // [N,C] a Sandwich norm's output
	selD             []int32   // [M] rows whose logits are needed
	rowH             []int32   // host [N] staging of rowD and selD
	fused            []float32 // [N, sum of widths]: a fused product's output (reduced dtypes)
	qkv, gu          []float32 // [N,NH*HD+2*NKV*HD], [N,2F]: the backend's fused products (gpu.DecodeFused)
	lora             loraScratch
	lowp             *lowpCopy // reduced-precision weights (SetDtype); nil: fp32
	// overlap scheduling (gpu.DecodeOverlap): the samples of a step on the
	// device, and the runs of a step's tokens copied from them
	sampD   []int32   // [Slots] sampled ids
	sampLpD []float32 // [Slots] their log-probs
	devRuns []devRun
	ov      gpu.DecodeOverlap

	// Prompts that share a prefix with a slot's cache (GRPO's n samples of a prompt, the
	// next turn of a conversation) copy its keys and values instead of prefilling them
	// again; NoPrefixSharing turns that off. PrefillTokens and SharedTokens count the
	// prompt tokens run and copied.
	NoPrefixSharing             bool
	PrefillTokens, SharedTokens int
	// cache[s] are the tokens whose keys and values slot s holds at positions 0..len-1,
	// computed with the weights of stamp (kept across calls while those do not change).
	cache [][]int32
	stamp weightsStamp
	id    uint64 // names the generator's decode graphs (gpu.DecodeGraph)
}

// generators numbers the generators (Generator.id).
var generators atomic.Uint64

// weightsStamp identifies the weights a generator computes with: a change of any part
// makes the keys and values in its cache stale.
type weightsStamp struct {
	params        *Params
	paramsVersion uint64
	lora          *LoRA
	loraVersion   uint64
	loraOff       bool
	lowp          *lowpCopy
	lowpVersion   uint64
}

func (g *Generator) weightsStamp() weightsStamp {
	st := weightsStamp{params: g.m.Params, paramsVersion: g.m.Params.version, lora: g.m.lora, lowp: g.lowp}
	if g.m.lora != nil {
		st.loraVersion, st.loraOff = g.m.lora.version, g.m.lora.off
	}
	if g.lowp != nil {
		st.lowpVersion = g.lowp.version
	}
	return st
}

// checkCache forgets the cached prompts when the weights changed since they were computed.
func (g *Generator) checkCache() {
	if st := g.weightsStamp(); st != g.stamp {
		for s := range g.cache {
			g.cache[s] = g.cache[s][:0]
		}
		g.stamp = st
	}
}

// NewGenerator allocates a KV cache for slots sequences of maxT tokens.
func (m *Model) NewGenerator(slots, maxT int) (g *Generator, err error) {
	c := m.Config
	if slots <= 0 || maxT <= 0 {
		return nil, fmt.Errorf("model: generator needs slots > 0 and maxT > 0, got %d and %d", slots, maxT)
	}
	if maxT > c.MaxPos {
		return nil, fmt.Errorf("model: generator length %d exceeds the model's %d positions", maxT, c.MaxPos)
	}
	defer gpu.RecoverMemory(&err)
	g = &Generator{m: m, Slots: slots, MaxT: maxT, cache: make([][]int32, slots), id: generators.Add(1)}
	// the padding's slot, where a backend has decode graphs (on or off: they can be
	// switched on later) and some batch size of this generator is padded
	if _, ok := m.be.(gpu.DecodeGraph); ok {
		for n := 1; n <= slots && !g.padSlot; n++ {
			g.padSlot = decodeBucket(n, slots) > n
		}
	}
	S := slots
	if g.padSlot {
		S++
	}
	// rolling caches for the sliding-window layers whose window is well short of maxT
	// (rows = window + chunk - 1 with chunk the shortest such window)
	for l := 0; l < c.L; l++ {
		if w := c.Window(l); w > 0 && 2*w-1 < maxT && (g.chunk == 0 || w < g.chunk) {
			g.chunk = w
		}
	}
	g.rows = make([]int, c.L)
	for l := range g.rows {
		g.rows[l] = maxT
		if w := c.Window(l); w > 0 && g.chunk > 0 && w+g.chunk-1 < maxT {
			g.rows[l] = w + g.chunk - 1
		}
	}
	for l := 0; l < c.L; l++ {
		g.kc = append(g.kc, m.be.Alloc(fmt.Sprintf("KV cache: layer %d keys", l), S*g.rows[l]*c.NKV*c.HD))
		g.vc = append(g.vc, m.be.Alloc(fmt.Sprintf("KV cache: layer %d values", l), S*g.rows[l]*c.NKV*c.HD))
	}
	return g, nil
}

// ringRows is the rows of the rolling caches (they all have the same), 0 when there are none.
func (g *Generator) ringRows() int {
	for _, r := range g.rows {
		if r != g.MaxT {
			return r
		}
	}
	return 0
}

// tensor returns *b as a tensor of n floats of the model's backend,
// replacing it by a larger one when it is too small.
func (g *Generator) tensor(b *[]float32, n int, name string) []float32 {
	if cap(*b) < n {
		if *b != nil {
			g.m.be.Free((*b)[:cap(*b)])
		}
		*b = g.m.be.Alloc("generation: "+name, max(n, 2*cap(*b)))
	}
	return (*b)[:n]
}

// tensorInt32 is tensor for int32.
func (g *Generator) tensorInt32(b *[]int32, n int, name string) []int32 {
	if cap(*b) < n {
		if *b != nil {
			g.m.be.Free((*b)[:cap(*b)])
		}
		*b = g.m.be.AllocInt32("generation: "+name, n)
	}
	return (*b)[:n]
}

func grow(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// forward runs tokens [N] (token n in cache slot slot[n] at position pos[n])
// through the model, writing their keys and values into the cache, and
// returns the logits [len(rows), V] of the tokens at indexes rows: a tensor
// of the backend (Backend.SampleTokens samples them where they are).
func (g *Generator) forward(tokens, slot, pos []int32, rows []int) []float32 {
	m := g.m
	be, c, p := g.backend(), m.Config, m.Params
	// a decode step (every token's logits: no prompt token but a prompt's
	// last) runs as one graph where the backend has them (gpu.DecodeGraph;
	// none on gpu/cpu), padded to its bucket's batch
	decode := len(rows) == len(tokens)
	for i, r := range rows {
		decode = decode && r == i
	}
	dg := gpu.DecodeGraphOps(m.be)
	graph := dg != nil && decode && g.lowp == nil
	sampled, T := len(rows), len(tokens) // the rows sampled, the tokens the slots' caches keep
	if graph && g.padSlot {
		tokens, slot, pos, rows = g.padDecode(tokens, slot, pos, rows)
	}
	N := len(tokens)
	QD, KD := c.NH*c.HD, c.NKV*c.HD
	g.x, g.ln, g.tmp = g.tensor(&g.x, N*c.C, "x"), g.tensor(&g.ln, N*c.C, "ln"), g.tensor(&g.tmp, N*c.C, "tmp")
	g.q, g.atty = g.tensor(&g.q, N*QD, "q"), g.tensor(&g.atty, N*QD, "attention output")
	g.k, g.v = g.tensor(&g.k, N*KD, "k"), g.tensor(&g.v, N*KD, "v")
	g.gate, g.up = g.tensor(&g.gate, N*c.F, "gate"), g.tensor(&g.up, N*c.F, "up")
	nr := max(N, len(rows))
	if c.QKNorm {
		nr = max(nr, N*c.NH) // the QK-norms' rows
	}
	g.rstd = g.tensor(&g.rstd, nr, "rstd")
	// the step's indexes go up once: tokens, positions, slots, cache rows
	tokD, posD := g.tensorInt32(&g.tokD, N, "tokens"), g.tensorInt32(&g.posD, N, "positions")
	slotD, rowD := g.tensorInt32(&g.slotD, N, "slots"), g.tensorInt32(&g.rowD, N, "cache rows")
	g.rowH = grow32(g.rowH, max(N, len(rows)))
	for n := range N {
		g.rowH[n] = slot[n]*int32(g.MaxT) + pos[n]
	}
	be.UploadInt32(tokD, tokens)
	for _, r := range g.devRuns { // the previous step's samples, not yet read by the host
		g.ov.CopyInt32(tokD[r.dst:r.dst+r.n], g.sampD[r.src:r.src+r.n])
	}
	be.UploadInt32(posD, pos)
	be.UploadInt32(slotD, slot)
	be.UploadInt32(rowD, g.rowH[:N])
	var ringD []int32 // the rolling caches' rows
	if R := g.ringRows(); R > 0 {
		ringD = g.tensorInt32(&g.ringD, N, "rolling cache rows")
		for n := range N {
			g.rowH[n] = slot[n]*int32(R) + pos[n]%int32(R)
		}
		be.UploadInt32(ringD, g.rowH[:N])
	}
	M := len(rows)
	g.sel, g.lnsel = g.tensor(&g.sel, M*c.C, "selected rows"), g.tensor(&g.lnsel, M*c.C, "selected rows, normalised")
	logitsD := g.tensor(&g.logitsD, M*c.V, "logits")
	selD := g.tensorInt32(&g.selD, M, "selected rows")
	for i, r := range rows {
		g.rowH[i] = int32(r)
	}
	be.UploadInt32(selD, g.rowH[:M])

	g.checkCache()
	if g.chunk > 0 { // rolling caches: a forward writes at most a chunk of a slot's positions
		g.perSlot = grow32(g.perSlot, g.Slots)
		clear(g.perSlot)
		for _, s := range slot[:T] {
			if g.perSlot[s]++; int(g.perSlot[s]) > g.chunk {
				panic(fmt.Sprintf("model: generator: more than %d tokens of slot %d in one forward overwrite its rolling cache", g.chunk, s))
			}
		}
	}
	for n, t := range tokens[:T] { // the slots' caches will hold these tokens (the padding's: none)
		s, j := slot[n], int(pos[n])
		if j > len(g.cache[s]) {
			panic(fmt.Sprintf("model: generator: slot %d position %d written before position %d", s, j, len(g.cache[s])))
		}
		g.cache[s] = append(g.cache[s][:j], t)
	}
	// the backend's fused ops (gpu.DecodeFused; none on gpu/cpu), on the
	// layers whose q/k/v or gate/up products have no LoRA adapters; gate
	// and up in one product up to fusedGateUpMaxRows rows, SwiGLU only
	df := gpu.DecodeFusedOps(be)
	fuseGU := df != nil && N <= fusedGateUpMaxRows && c.Act == SiLU
	if df != nil {
		g.qkv = g.tensor(&g.qkv, N*(QD+2*KD), "q, k and v")
	}
	if fuseGU {
		g.gu = g.tensor(&g.gu, N*2*c.F, "gate and up")
	}
	if c.Sandwich {
		g.gu2 = g.tensor(&g.gu2, N*c.C, "normalised output")
	}
	nw := m.normW() // before the graph: the offset norm weights may need refreshing
	// the decode step's graph: every input is on the device already, and
	// nothing comes back before the logits
	if graph {
		dg.BeginDecodeGraph(g.id<<32 | uint64(N))
		defer dg.EndDecodeGraph()
	}
	be.EmbeddingForward(g.x, tokD, p.Embed, N, c.C)
	if c.EmbedScale != 0 {
		be.Scale(g.x[:N*c.C], c.EmbedScale)
	}
	be.RMSNormForward(g.ln, g.rstd, g.x, nw.ln1[0], N, c.C, c.Eps)
	for l := 0; l < c.L; l++ {
		// g.ln holds ln1(x) of this layer: the norm above, or the previous
		// layer's last op (the residual add fused with this norm)
		lp := &p.Layers[l]
		fl := g.fusedLayer(l)
		cos, sin := m.rope(l)
		cacheRows, win := rowD, c.Window(l)
		if g.rows[l] != g.MaxT {
			cacheRows = ringD
		}
		if df != nil && fl == nil && lp.wqkv != nil && !c.QKNorm && m.adapter(l, modQ) == nil && m.adapter(l, modK) == nil &&
			m.adapter(l, modV) == nil { // one product, then the biases, RoPE and the cache writes in one op
			be.MatmulForward(g.qkv, g.ln, lp.wqkv, nil, N, c.C, QD+2*KD)
			df.QKVRopeCacheForward(g.q, g.kc[l], g.vc[l], g.qkv, lp.bqkv, posD, cacheRows, cos, sin,
				N, c.NH, c.NKV, c.HD, m.Rope)
		} else {
			if fl != nil { // one product for q, k and v
				g.fused = grow(g.fused, N*(QD+2*KD))
				cpu.LowpMatmul(g.fused, g.ln, fl.qkv, fl.bqkv, N)
				unstack(g.fused, N, [][]float32{g.q, g.k, g.v}, []int{QD, KD, KD})
			} else {
				be.MatmulForward(g.q, g.ln, lp.WQ, lp.BQ, N, c.C, QD)
				be.MatmulForward(g.k, g.ln, lp.WK, lp.BK, N, c.C, KD)
				be.MatmulForward(g.v, g.ln, lp.WV, lp.BV, N, c.C, KD)
			}
			m.loraForward(&g.lora, nil, g.q, g.ln, m.adapter(l, modQ), N)
			m.loraForward(&g.lora, nil, g.k, g.ln, m.adapter(l, modK), N)
			m.loraForward(&g.lora, nil, g.v, g.ln, m.adapter(l, modV), N)
			if c.QKNorm { // each head of q and k normalised in place (rstd discarded)
				be.RMSNormForward(g.q, g.rstd, g.q, nw.qn[l], N*c.NH, c.HD, c.Eps)
				be.RMSNormForward(g.k, g.rstd, g.k, nw.kn[l], N*c.NKV, c.HD, c.Eps)
			}
			if df != nil && fl == nil { // RoPE and the cache writes in one op
				df.RopeCacheForward(g.q, g.kc[l], g.vc[l], g.k, g.v, posD, cacheRows, cos, sin, N, c.NH, c.NKV, c.HD, m.Rope)
			} else {
				be.RopeQKForward(g.q, g.k, posD, cos, sin, N, c.NH, c.NKV, c.HD, m.Rope)
				be.ScatterRows(g.kc[l], g.k, cacheRows, N, KD)
				be.ScatterRows(g.vc[l], g.v, cacheRows, N, KD)
			}
		}
		if c.QScale != 0 && c.QScale != 1 {
			be.Scale(g.q[:N*QD], c.QScale)
		}
		be.AttentionCachedForward(g.atty, g.q, g.kc[l], g.vc[l], slotD, posD, N, c.NH, c.NKV, c.HD, g.rows[l], win)
		be.MatmulForward(g.tmp, g.atty, lp.WO, nil, N, QD, c.C)
		m.loraForward(&g.lora, nil, g.tmp, g.atty, m.adapter(l, modO), N)
		if c.Sandwich { // the output's norm, then the residual add and the MLP's input norm
			be.RMSNormForward(g.gu2, g.rstd, g.tmp, nw.ln2[l], N, c.C, c.Eps)
			be.ResidualRMSNormForward(g.x, g.ln, g.rstd, g.x, g.gu2, nw.pre[l], N, c.C, c.Eps)
		} else {
			be.ResidualRMSNormForward(g.x, g.ln, g.rstd, g.x, g.tmp, nw.ln2[l], N, c.C, c.Eps)
		}
		if fuseGU && fl == nil && lp.wgu != nil && m.adapter(l, modGate) == nil && m.adapter(l, modUp) == nil {
			be.MatmulForward(g.gu, g.ln, lp.wgu, nil, N, c.C, 2*c.F) // one product, SwiGLU over its rows
			df.SwiGLURowsForward(g.gate, g.gu, N, c.F)
		} else {
			if fl != nil { // one product for gate and up
				g.fused = grow(g.fused, N*2*c.F)
				cpu.LowpMatmul(g.fused, g.ln, fl.gateUp, nil, N)
				unstack(g.fused, N, [][]float32{g.gate, g.up}, []int{c.F, c.F})
			} else {
				be.MatmulForward(g.gate, g.ln, lp.WGate, nil, N, c.C, c.F)
				be.MatmulForward(g.up, g.ln, lp.WUp, nil, N, c.C, c.F)
			}
			m.loraForward(&g.lora, nil, g.gate, g.ln, m.adapter(l, modGate), N)
			m.loraForward(&g.lora, nil, g.up, g.ln, m.adapter(l, modUp), N)
			if c.Act == GELUTanh {
				be.GeGLUForward(g.gate, g.gate, g.up, N*c.F)
			} else {
				be.SwiGLUForward(g.gate, g.gate, g.up, N*c.F)
			}
		}
		be.MatmulForward(g.tmp, g.gate, lp.WDown, nil, N, c.F, c.C)
		m.loraForward(&g.lora, nil, g.tmp, g.gate, m.adapter(l, modDown), N)
		mlpOut := g.tmp
		if c.Sandwich {
			be.RMSNormForward(g.gu2, g.rstd, g.tmp, nw.post[l], N, c.C, c.Eps)
			mlpOut = g.gu2
		}
		if l+1 < c.L { // with the next layer's ln1
			be.ResidualRMSNormForward(g.x, g.ln, g.rstd, g.x, mlpOut, nw.ln1[l+1], N, c.C, c.Eps)
		} else { // the final norm runs on the selected rows only
			be.ResidualForward(g.x, g.x, mlpOut, N*c.C)
		}
	}
	be.GatherRows(g.sel, g.x, selD, M, c.C)
	be.RMSNormForward(g.lnsel, g.rstd, g.sel, nw.final, M, c.C, c.Eps)
	be.MatmulForward(logitsD, g.lnsel, p.LMHead, nil, M, c.C, c.V)
	if c.FinalSoftcap != 0 {
		be.SoftcapForward(logitsD, c.FinalSoftcap, M*c.V)
	}
	if M > sampled { // padded: the real rows' logits, the first ones
		if PlantDecodePadding == "tail" {
			return logitsD[(M-sampled)*c.V:] // planted bug: the last rows' (the padding's among them)
		}
		return logitsD[:sampled*c.V]
	}
	return logitsD
}

// decodeBucket is the batch a decode step of n rows runs as on a backend
// that replays decode graphs (gpu.DecodeGraph, on), where each batch size
// is a graph of its own, captured the second time it comes in a row: n
// itself up to 2, then 4, then the next multiple of 8, at most slots (the
// generator's capacity). These are vLLM's capture sizes (1, 2, 4, 8, 16,
// 24, ...): a batch that shrinks as its sequences finish at different
// lengths goes through at most 3 + ceil(slots/8) sizes (35 for 256
// slots), each of several steps, instead of up to slots sizes of a step or
// two each (each run eager, then captured, seldom replayed), for at most 7
// rows more a step (2 from 3 rows to 4, 1 to 7 above).
func decodeBucket(n, slots int) int {
	b := n
	switch {
	case n <= 2:
	case n <= 4:
		b = 4
	default:
		b = (n + 7) / 8 * 8
	}
	return max(n, min(b, slots))
}

// padToken is the token of the rows that pad a decode step (any token of
// the vocabulary would do: nothing reads their results).
const padToken = 0

// padDecode pads a decode step of n rows to decodeBucket(n, Slots) rows:
// the rows added are padToken at position 0 of the padding's slot (slot
// Slots of the cache, which no request occupies), whose keys and values
// they write and alone read (every row at position 0 attends to position 0
// of its own slot), and whose logits come after the real rows' (forward
// returns only these). Rows are computed independently of each other, so
// the real rows' results are those of the step unpadded.
func (g *Generator) padDecode(tokens, slot, pos []int32, rows []int) ([]int32, []int32, []int32, []int) {
	n := len(tokens)
	P := decodeBucket(n, g.Slots)
	if P == n {
		return tokens, slot, pos, rows
	}
	pad := int32(g.Slots)
	if PlantDecodePadding == "slot0" {
		pad = 0 // planted bug: the padding writes position 0 of a request's slot
	}
	g.padTok, g.padSl = append(g.padTok[:0], tokens...), append(g.padSl[:0], slot...)
	g.padPos, g.padRows = append(g.padPos[:0], pos...), append(g.padRows[:0], rows...)
	for i := n; i < P; i++ {
		g.padTok, g.padSl, g.padPos = append(g.padTok, padToken), append(g.padSl, pad), append(g.padPos, 0)
		g.padRows = append(g.padRows, i)
	}
	return g.padTok, g.padSl, g.padPos, g.padRows
}

// fusedGateUpMaxRows bounds the rows of a forward whose gate and up run as
// one product (gpu.DecodeFused): it pays where a step's launches dominate
// (decode steps, small prefills), while its [N, 2F] output is a buffer
// the separate products do not need (40 MB for Qwen2.5-0.5B's F 4864 at
// this bound); a larger forward (a long prefill) runs them apart.
var fusedGateUpMaxRows = 1024

// unstack splits the N rows of src, each the concatenation of parts of the
// given widths, into the parts' own [N, width] buffers.
func unstack(src []float32, N int, dst [][]float32, widths []int) {
	total := 0
	for _, w := range widths {
		total += w
	}
	for n := 0; n < N; n++ {
		off := n * total
		for i, w := range widths {
			copy(dst[i][n*w:(n+1)*w], src[off:off+w])
			off += w
		}
	}
}

// ErrPromptTooLong is returned when a prompt leaves no room to generate.
var ErrPromptTooLong = errors.New("model: prompt does not fit the generator's length")

// running is a request occupying a slot.
type running struct {
	req    int   // index into the requests
	slot   int   // the slot it occupies
	next   int32 // the last token sampled that the host has read
	plen   int   // prompt tokens: sample k (from 1) sits at position plen-1+k of the slot
	fill   int   // prompt tokens run or copied so far (plen once the prompt is in the cache)
	nsched int   // samples scheduled: read, and in flight (overlap scheduling)
	last   bool  // the last sample scheduled ends it by length (MaxTokens, MaxT)
	fin    bool  // finished: handed to done
	devAt  int   // the position of its sample in flight forwarded from the device (-1: none)
	rng    *rand.Rand
	res    *Result
}

// schedule counts one more sample of r in the step being planned.
func (r *running) schedule(sc *SampleConfig, maxT int) {
	r.nsched++
	r.last = r.nsched >= sc.MaxTokens || r.plen-1+r.nsched >= maxT
}

// devRun is a run of n tokens of a step copied on the device from the
// previous step's samples: tokens [dst, dst+n) from samples [src, src+n).
type devRun struct{ dst, src, n int }

// genStep is a step's sampled rows and their samples.
type genStep struct {
	rows   []*running // in sample order
	ticket int        // the samples' download (overlap scheduling)
	toks   []int32
	lps    []float32
}

// Generate runs every request to completion and returns their results in
// order. A request generates until MaxTokens, a stop token (any of the model's
// eos ids unless IgnoreEOS, or one of StopTokens), its Stop func, or the end of
// the slot (MaxT positions).
func (g *Generator) Generate(reqs []Request) ([]Result, error) {
	for i, r := range reqs {
		if err := g.checkRequest(r); err != nil {
			return nil, fmt.Errorf("%w (request %d)", err, i)
		}
	}
	results := make([]Result, len(reqs))
	err := g.Stream(reqs, nil, func(i int, res Result, err error) { results[i] = res })
	if err != nil {
		return nil, err
	}
	return results, nil
}

// checkRequest says what is wrong with a request, if anything.
func (g *Generator) checkRequest(r Request) error {
	c := g.m.Config
	if len(r.Prompt) == 0 {
		return errors.New("model: request has an empty prompt")
	}
	if len(r.Prompt) >= g.MaxT {
		return fmt.Errorf("%w: request has %d prompt tokens, generator length is %d", ErrPromptTooLong, len(r.Prompt), g.MaxT)
	}
	if r.Sample.MaxTokens <= 0 {
		return fmt.Errorf("model: request: MaxTokens is %d, want > 0", r.Sample.MaxTokens)
	}
	for _, t := range r.Prompt {
		if t < 0 || int(t) >= c.V {
			return fmt.Errorf("model: request: prompt token %d is outside the vocabulary [0,%d)", t, c.V)
		}
	}
	return nil
}

// Stream is Generate for requests that keep arriving: reqs, then before every
// step the requests feed returns (feed must not block; nil feed: none), are
// numbered in that order, and done(i, result, nil) is called as soon as
// request i finishes, while the others run on (continuous batching across
// callers). An invalid request is reported by done(i, Result{}, err) and
// the others go on. Stream returns when no request is running or waiting and
// feed has none; its error (the generator's own failure) means the requests
// not reported yet will not be. A request's tokens do not depend on when it
// arrived or what runs beside it (the kernels and sampling are per row).
func (g *Generator) Stream(reqs []Request, feed func() []Request, done func(i int, res Result, err error)) error {
	c := g.m.Config
	eos := c.EOSIDs() // one to a few ids: a slice scan per sampled token
	if err := g.syncLowp(); err != nil {
		return err
	}
	be := g.m.be
	// overlap scheduling: a decode step is queued before the host reads the
	// previous step's samples, its tokens copied from them on the device
	g.ov = gpu.DecodeOverlapOps(be)
	defer func() { g.ov, g.devRuns = nil, g.devRuns[:0] }()
	reqs = slices.Clone(reqs)
	slots := make([]*running, g.Slots)
	g.checkCache() // prompts cached by earlier calls stay usable while the weights do not change
	cached := g.cache
	var waiting []int
	admit := func(from int) {
		for i := from; i < len(reqs); i++ {
			if err := g.checkRequest(reqs[i]); err != nil {
				done(i, Result{}, err)
				continue
			}
			waiting = append(waiting, i)
		}
	}
	admit(0)
	// finish reads a step's samples (waiting for their copy where it was
	// queued) and hands each request its token; a request that finished
	// in an earlier step computed this one only because the host did not
	// know yet: it is dropped.
	finish := func(st *genStep) {
		M := len(st.rows)
		if g.ov != nil {
			st.toks, st.lps = grow32(st.toks, M), grow(st.lps, M)
			g.ov.WaitDownload(st.ticket, st.toks, st.lps)
		}
		for i, r := range st.rows {
			if r.fin {
				continue
			}
			sc := &reqs[r.req].Sample
			tok, lp := st.toks[i], st.lps[i]
			if r.devAt >= 0 { // the next step forwarded it from the device
				if r.devAt < len(g.cache[r.slot]) {
					g.cache[r.slot][r.devAt] = tok
				}
				r.devAt = -1
			}
			r.res.Tokens = append(r.res.Tokens, tok)
			r.res.Logprobs = append(r.res.Logprobs, lp)
			r.next = tok
			switch {
			case (!sc.IgnoreEOS && slices.Contains(eos, tok)) || slices.Contains(sc.StopTokens, tok) ||
				(sc.Stop != nil && sc.Stop(r.res.Tokens)):
				r.res.FinishReason = "stop"
			case len(r.res.Tokens) >= sc.MaxTokens || r.plen-1+len(r.res.Tokens) >= g.MaxT:
				r.res.FinishReason = "length"
			default:
				continue
			}
			r.fin = true
			slots[r.slot] = nil // finished: the slot takes the next request
			done(r.req, *r.res, nil)
		}
	}
	var tokens, slot, pos []int32
	var rows []int
	var params []gpu.SampleParams
	var prefilling [][]int32
	var steps [2]genStep
	var pend *genStep // the step whose samples are in flight
	for cur := 0; ; cur ^= 1 {
		if feed != nil {
			n := len(reqs)
			reqs = append(reqs, feed()...)
			admit(n)
		}
		if pend != nil && (len(waiting) > 0 && slices.Contains(slots, nil) || slices.ContainsFunc(slots, filling)) {
			finish(pend) // a request can be admitted, or a prompt goes on: plan the step knowing the tokens
			pend = nil
		}
		st := &steps[cur]
		st.rows = st.rows[:0]
		tokens, slot, pos, rows = tokens[:0], slot[:0], pos[:0], rows[:0]
		g.devRuns = g.devRuns[:0]
		if pend != nil {
			// decode tokens of the previous step's rows, its samples: those that
			// have not finished (as far as the host knows)
			for i, r := range pend.rows {
				if r.fin || r.last {
					continue
				}
				n := len(tokens)
				r.devAt = r.plen - 1 + r.nsched
				tokens, slot, pos = append(tokens, padToken), append(slot, int32(r.slot)), append(pos, int32(r.devAt))
				rows, st.rows = append(rows, n), append(st.rows, r)
				if k := len(g.devRuns) - 1; k >= 0 && g.devRuns[k].dst+g.devRuns[k].n == n && g.devRuns[k].src+g.devRuns[k].n == i {
					g.devRuns[k].n++
				} else {
					g.devRuns = append(g.devRuns, devRun{dst: n, src: i, n: 1})
				}
				r.schedule(&reqs[r.req].Sample, g.MaxT)
			}
		} else {
			// decode tokens of the running requests, the next chunk of the prompts
			// still being prefilled (rolling caches: at most g.chunk tokens a step)
			for _, r := range slots {
				if r == nil {
					continue
				}
				if filling(r) {
					prompt := reqs[r.req].Prompt
					end := min(r.plen, r.fill+g.chunk)
					for j := r.fill; j < end; j++ {
						tokens, slot, pos = append(tokens, prompt[j]), append(slot, int32(r.slot)), append(pos, int32(j))
					}
					r.fill = end
					if end == r.plen {
						rows, st.rows = append(rows, len(tokens)-1), append(st.rows, r)
						r.schedule(&reqs[r.req].Sample, g.MaxT)
					}
					continue
				}
				tokens, slot, pos = append(tokens, r.next), append(slot, int32(r.slot)), append(pos, int32(r.plen-1+r.nsched))
				rows, st.rows = append(rows, len(tokens)-1), append(st.rows, r)
				r.schedule(&reqs[r.req].Sample, g.MaxT)
			}
			// admit waiting requests into free slots, prefilling their prompts after the longest
			// prefix a slot's cache already holds (copied, not recomputed)
			prefilling = prefilling[:0]
			for wi := 0; wi < len(waiting); {
				dst := -1 // the free slot whose cache is shortest: the longer ones may serve later prompts
				for s, r := range slots {
					if r == nil && (dst < 0 || len(cached[s]) < len(cached[dst])) {
						dst = s
					}
				}
				if dst < 0 {
					break
				}
				i := waiting[wi]
				prompt := reqs[i].Prompt
				src, p := g.sharedPrefix(prompt, cached)
				if !g.NoPrefixSharing {
					// a longer prefix is being prefilled in this step: admit this one in the
					// next, copying it
					q := 0
					for _, pf := range prefilling {
						q = max(q, commonPrefix(prompt, pf))
					}
					if q >= p+minSharedPrefix {
						wi++
						continue
					}
				} else {
					p = 0
				}
				waiting = slices.Delete(waiting, wi, wi+1)
				if p > 0 && slots[src] == nil && src != dst && commonPrefix(prompt, cached[dst]) < p {
					dst = src // the finished slot that holds the prefix: no copy
				}
				if p > 0 && src != dst {
					g.copyPrefix(dst, src, p)
				}
				cached[dst] = append(cached[dst][:0], cached[src][:p]...)
				g.SharedTokens += p
				g.PrefillTokens += len(prompt) - p
				r := &running{req: i, slot: dst, plen: len(prompt), fill: len(prompt), devAt: -1, res: &Result{},
					rng: rand.New(rand.NewPCG(reqs[i].Sample.Seed, 0x6a09e667f3bcc909))}
				slots[dst] = r
				end := len(prompt)
				if g.chunk > 0 {
					end = min(end, p+g.chunk)
				}
				for j := p; j < end; j++ {
					tokens, slot, pos = append(tokens, prompt[j]), append(slot, int32(dst)), append(pos, int32(j))
				}
				r.fill = end
				if end == len(prompt) {
					rows, st.rows = append(rows, len(tokens)-1), append(st.rows, r)
					r.schedule(&reqs[i].Sample, g.MaxT)
				}
				prefilling = append(prefilling, prompt)
			}
		}
		if len(tokens) == 0 {
			if pend != nil { // every row of the step in flight has finished
				finish(pend)
				pend = nil
				continue
			}
			if len(waiting) > 0 {
				return errors.New("model: generate: requests left waiting with every slot free")
			}
			return nil
		}
		logits := g.forward(tokens, slot, pos, rows)
		for _, r := range g.devRuns { // not known to the host yet (finish writes them)
			for _, row := range st.rows[r.dst : r.dst+r.n] {
				g.cache[row.slot][row.devAt] = -1
			}
		}
		M := len(st.rows)
		params = slices.Grow(params[:0], M)[:M]
		for i, r := range st.rows {
			params[i] = sampleParams(&reqs[r.req].Sample, r.rng, c.V)
		}
		// sampled where the logits are: only the M ids and log-probs come back
		if g.ov != nil {
			sampD := g.tensorInt32(&g.sampD, g.Slots, "samples")[:M]
			lpD := g.tensor(&g.sampLpD, g.Slots, "samples' log-probs")[:M]
			be.SampleTokens(sampD, lpD, logits, params, M, c.V)
			st.ticket = g.ov.DownloadQueued(sampD, lpD, M)
		} else {
			st.toks, st.lps = grow32(st.toks, M), grow(st.lps, M)
			be.SampleTokens(st.toks, st.lps, logits, params, M, c.V)
		}
		if pend != nil {
			finish(pend) // while the device runs st
		}
		pend = st
		if g.ov == nil {
			finish(pend)
			pend = nil
		}
	}
}

// filling reports whether r's prompt is still being prefilled (in chunks: rolling caches).
func filling(r *running) bool { return r != nil && r.fill < r.plen }

// minSharedPrefix is the shortest prefix worth waiting a step for: a request whose
// prompt shares at least this many more tokens with one being prefilled than with any
// cache is admitted in the next step, copying them.
const minSharedPrefix = 16

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// sharedPrefix finds the slot whose cache holds the longest prefix of prompt and its
// length, at most len(prompt)-1 (the last prompt token runs, for its logits). With
// rolling caches a slot serves only a prefix that ends in the last chunk of what it
// holds: the window before the prefix's end must still be in its rows.
func (g *Generator) sharedPrefix(prompt []int32, cached [][]int32) (src, p int) {
	for s, c := range cached {
		n := min(commonPrefix(prompt, c), len(prompt)-1)
		if g.chunk > 0 && n < len(c)-g.chunk {
			continue // the positions before n have been overwritten in its rolling rows
		}
		if n > p {
			src, p = s, n
		}
	}
	return src, p
}

// copyPrefix copies the keys and values of positions [0, p) from slot src to slot dst
// (a rolling cache's rows whole: sharedPrefix made sure they hold the window before p).
// Every row of a forward is computed the same way whatever else is in it, so these are
// the values a prefill of dst would have written.
func (g *Generator) copyPrefix(dst, src, p int) {
	KD := g.m.Config.NKV * g.m.Config.HD
	be := g.m.be
	for l := range g.kc {
		R, n := g.rows[l], p
		if R != g.MaxT {
			n = R
		}
		be.Copy(g.kc[l][dst*R*KD:dst*R*KD+n*KD], g.kc[l][src*R*KD:src*R*KD+n*KD])
		be.Copy(g.vc[l][dst*R*KD:dst*R*KD+n*KD], g.vc[l][src*R*KD:src*R*KD+n*KD])
	}
}

func grow32(b []int32, n int) []int32 {
	if cap(b) < n {
		return make([]int32, n)
	}
	return b[:n]
}

// sampleParams are the sampling settings of one token of a request, with
// the next uniform draw of its random stream when it samples (one draw per
// sampled token; none when greedy).
func sampleParams(sc *SampleConfig, rng *rand.Rand, V int) gpu.SampleParams {
	p := gpu.SampleParams{Temperature: sc.Temperature, TopK: int32(min(max(sc.TopK, 0), V)), TopP: sc.TopP}
	if p.Temperature > 0 {
		p.U = rng.Float64()
	}
	return p
}
