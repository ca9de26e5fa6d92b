package model

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
)

// Reduced-precision rollouts.
//
// A Generator computes with the fp32 master weights unless SetDtype asks for
// a bfloat16 or int8 copy of the linear layers' weights (q/k/v/o, gate, up,
// down and lm_head; embeddings, norms and biases stay fp32, activations and
// accumulation are fp32). The copy belongs to the generator and is rebuilt
// from the master weights at the start of a Generate call whenever
// Params.Version has moved since it was built: Params.Load and AdamW.Update
// bump it, so a trainer that alternates optimizer steps and rollouts needs
// no refresh call. LoRA adapters are not part of the copy: generation
// applies them in fp32 on top (they are read live), so adapter updates need
// no rebuild. Code that writes Params.Data directly must call
// Params.Changed, and code that writes LoRA.Data directly LoRA.Changed: the
// generator also keeps the keys and values of the prompts it ran, for later
// prompts that share their prefix, while the weights stay the same.

// Changed records that the parameters were modified in place; reduced-
// precision generator copies are rebuilt before their next use.
func (p *Params) Changed() { p.version++ }

// Version counts the recorded modifications of the parameters.
func (p *Params) Version() uint64 { return p.version }

// lowpCopy is a generator's reduced-precision copy of the linear weights.
type lowpCopy struct {
	dtype   cpu.Dtype
	params  *Params
	version uint64
	src     [][][]float32 // per matrix of list: its fp32 weights, stacked by rows
	mats    map[*float32]*cpu.LowpMatrix
	list    []*cpu.LowpMatrix
	layers  []lowpLayer
	scratch []float32     // stacking buffer
	Rebuild time.Duration // time of the last (re)build
}

// lowpLayer holds a layer's fused products: q, k and v in one matrix
// [QD+2KD, C], gate and up in one [2F, C] (one product each: the activations
// are read and converted once).
type lowpLayer struct {
	qkv, gateUp *cpu.LowpMatrix
	bqkv        []float32 // the q, k, v biases side by side; nil without biases
}

// stack returns parts stacked (one part: itself), in lc.scratch.
func (lc *lowpCopy) stack(parts [][]float32) []float32 {
	if len(parts) == 1 {
		return parts[0]
	}
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	lc.scratch = grow(lc.scratch, n)
	n = 0
	for _, p := range parts {
		n += copy(lc.scratch[n:], p)
	}
	return lc.scratch
}

// refreshBiases copies the live q/k/v biases into the fused bias vectors.
func (lc *lowpCopy) refreshBiases() {
	for l := range lc.layers {
		if b := lc.layers[l].bqkv; b != nil {
			lp := &lc.params.Layers[l]
			n := copy(b, lp.BQ)
			n += copy(b[n:], lp.BK)
			copy(b[n:], lp.BV)
		}
	}
}

// lowpBackend is the model's backend with MatmulForward on the copy for the
// weights it holds.
type lowpBackend struct {
	gpu.Backend
	c *lowpCopy
}

func (b lowpBackend) MatmulForward(out, inp, weight, bias []float32, N, C, OC int) {
	if q := b.c.mats[unsafe.SliceData(weight)]; q != nil && q.Rows == OC && q.Cols == C {
		cpu.LowpMatmul(out, inp, q, bias, N)
		return
	}
	b.Backend.MatmulForward(out, inp, weight, bias, N, C, OC)
}

// Dtype is the weight type the generator computes with.
func (g *Generator) Dtype() cpu.Dtype {
	if g.lowp == nil {
		return cpu.Float32
	}
	return g.lowp.dtype
}

// AutoDtype is the weight type `auto` picks for this generator:
// cpu.AutoDtype() on the CPU backend, float32 on the others (reduced-precision
// generation runs on the CPU backend only).
func (g *Generator) AutoDtype() cpu.Dtype {
	if _, ok := g.m.be.(cpu.Backend); !ok {
		return cpu.Float32
	}
	return cpu.AutoDtype()
}

// SetDtypeName is SetDtype by name: "auto" (AutoDtype) or a name
// cpu.ParseDtype reads. It returns the type chosen.
func (g *Generator) SetDtypeName(name string) (cpu.Dtype, error) {
	d := g.AutoDtype()
	if name != "auto" {
		var err error
		if d, err = cpu.ParseDtype(name); err != nil {
			return 0, err
		}
	}
	return d, g.SetDtype(d)
}

// SetDtype chooses the weight type of generation: cpu.Float32 (the master
// weights: log-probs equal the training forward's), cpu.BFloat16 or
// cpu.Int8. The copy is built here and refreshed by Generate when the
// parameters change. Reduced types need the CPU backend.
func (g *Generator) SetDtype(d cpu.Dtype) error {
	switch d {
	case cpu.Float32:
		g.lowp = nil
		return nil
	case cpu.BFloat16, cpu.Int8:
	default:
		return fmt.Errorf("model: unknown generation dtype %v", d)
	}
	if _, ok := g.m.be.(cpu.Backend); !ok {
		return fmt.Errorf("model: generation dtype %v needs the cpu backend, not %s", d, g.m.be.Name())
	}
	c := g.m.Config
	p := g.m.Params
	lc := &lowpCopy{dtype: d, mats: map[*float32]*cpu.LowpMatrix{}}
	QD, KD := c.NH*c.HD, c.NKV*c.HD
	build := func(rows, cols int, parts ...[]float32) (*cpu.LowpMatrix, error) {
		q, err := cpu.Quantize(d, lc.stack(parts), rows, cols)
		if err != nil {
			return nil, err
		}
		lc.list = append(lc.list, q)
		lc.src = append(lc.src, parts)
		return q, nil
	}
	add := func(w []float32, rows, cols int) error {
		if lc.mats[unsafe.SliceData(w)] != nil {
			return nil
		}
		q, err := build(rows, cols, w)
		lc.mats[unsafe.SliceData(w)] = q
		return err
	}
	start := time.Now()
	lc.params = p
	lc.layers = make([]lowpLayer, len(p.Layers))
	for l := range p.Layers {
		lp, ll := &p.Layers[l], &lc.layers[l]
		var err error
		if ll.qkv, err = build(QD+2*KD, c.C, lp.WQ, lp.WK, lp.WV); err != nil {
			return fmt.Errorf("model: layer %d: q/k/v: %w", l, err)
		}
		if ll.gateUp, err = build(2*c.F, c.C, lp.WGate, lp.WUp); err != nil {
			return fmt.Errorf("model: layer %d: gate/up: %w", l, err)
		}
		if lp.BQ != nil {
			ll.bqkv = make([]float32, QD+2*KD)
		}
		for _, t := range []struct {
			w          []float32
			rows, cols int
		}{{lp.WO, c.C, QD}, {lp.WDown, c.C, c.F}} {
			if err := add(t.w, t.rows, t.cols); err != nil {
				return fmt.Errorf("model: layer %d: %w", l, err)
			}
		}
	}
	if err := add(p.LMHead, c.V, c.C); err != nil {
		return fmt.Errorf("model: lm_head: %w", err)
	}
	lc.refreshBiases()
	lc.scratch = nil
	lc.version, lc.Rebuild = p.version, time.Since(start)
	g.lowp = lc
	return nil
}

// syncLowp rebuilds the copy if the parameters changed since it was built.
func (g *Generator) syncLowp() error {
	lc := g.lowp
	if lc == nil {
		return nil
	}
	if lc.params != g.m.Params { // the parameter set was replaced: build anew
		return g.SetDtype(lc.dtype)
	}
	if lc.version == lc.params.version {
		return nil
	}
	start := time.Now()
	for i, q := range lc.list {
		q.Requantize(lc.stack(lc.src[i]))
	}
	lc.refreshBiases()
	lc.scratch = nil
	lc.version, lc.Rebuild = lc.params.version, time.Since(start)
	return nil
}

// LowpRebuildTime is how long the last build or refresh of the reduced-
// precision copy took (0 with fp32 weights).
func (g *Generator) LowpRebuildTime() time.Duration {
	if g.lowp == nil {
		return 0
	}
	return g.lowp.Rebuild
}

// LowpBytes is the size of the reduced-precision copy (0 with fp32 weights).
func (g *Generator) LowpBytes() int {
	n := 0
	if g.lowp != nil {
		for _, q := range g.lowp.list {
			n += q.Bytes()
		}
	}
	return n
}

// fusedLayer is layer l's fused products, or nil (fp32 weights).
func (g *Generator) fusedLayer(l int) *lowpLayer {
	if g.lowp == nil {
		return nil
	}
	return &g.lowp.layers[l]
}

// decodeBackend is the cpu backend with generation's products (cpu.DecodeMatmul).
type decodeBackend struct{ cpu.Backend }

func (decodeBackend) MatmulForward(out, inp, weight, bias []float32, N, C, OC int) {
	cpu.DecodeMatmul(out, inp, weight, bias, N, C, OC)
}

// backend is what forward computes with.
func (g *Generator) backend() gpu.Backend {
	if g.lowp != nil {
		return lowpBackend{g.m.be, g.lowp}
	}
	if be, ok := g.m.be.(cpu.Backend); ok {
		return decodeBackend{be}
	}
	return g.m.be
}
