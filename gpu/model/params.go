package model

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/weights"
)

// LayerParams are one decoder layer's tensors (views into Params.Data).
type LayerParams struct {
	LN1    []float32 // input_layernorm.weight [C]
	WQ, BQ []float32 // self_attn.q_proj [NH*HD, C], bias [NH*HD] (nil without bias)
	WK, BK []float32 // self_attn.k_proj [NKV*HD, C], bias [NKV*HD]
	WV, BV []float32 // self_attn.v_proj [NKV*HD, C], bias [NKV*HD]
	WO     []float32 // self_attn.o_proj [C, NH*HD]
	QNorm  []float32 // self_attn.q_norm.weight [HD] (QKNorm families; nil otherwise)
	KNorm  []float32 // self_attn.k_norm.weight [HD]
	// LN2 is post_attention_layernorm.weight [C]: the MLP's input norm, or with
	// Sandwich (gemma3_text) the norm of the attention's output
	LN2        []float32
	PreFFN     []float32 // pre_feedforward_layernorm.weight [C] (Sandwich; the MLP's input norm)
	PostFFN    []float32 // post_feedforward_layernorm.weight [C] (Sandwich; the MLP's output norm)
	WGate, WUp []float32 // mlp.gate_proj, mlp.up_proj [F, C]
	WDown      []float32 // mlp.down_proj [C, F]

	// views of the blocks the generator's fused products read
	// (gpu.DecodeFused): q_proj, k_proj, v_proj lie in turn in Data, and so
	// do their biases, gate_proj and up_proj
	wqkv []float32 // WQ | WK | WV [NH*HD + 2*NKV*HD, C]
	bqkv []float32 // BQ | BK | BV, nil without bias
	wgu  []float32 // WGate | WUp [2F, C]
}

// Params is every parameter of a model in one flat tensor of its backend,
// with views. The same layout holds gradients and optimizer moments. On a
// GPU backend Data and the views are device memory: read them with
// Download (or Checkpoint), write them with Load or Upload.
type Params struct {
	be     gpu.Backend
	Data   []float32
	Embed  []float32 // model.embed_tokens.weight [V, C]
	Layers []LayerParams
	NormF  []float32 // model.norm.weight [C]
	LMHead []float32 // lm_head.weight [V, C]; aliases Embed when tied
	Names  []ParamInfo

	version uint64 // bumped by Changed (lowp.go)
}

// ParamInfo names one tensor of Params: its Hugging Face name, shape and view.
type ParamInfo struct {
	Name  string
	Shape []int
	Data  []float32
}

// NewParams allocates a zeroed parameter set for c on be (what says what
// it holds, e.g. "parameters" or "gradients", for an out-of-memory error).
func NewParams(be gpu.Backend, c Config, what string) *Params {
	p := &Params{be: be, Data: be.Alloc(what, c.NumParams())} // on the CPU: huge pages, streamed by every decode step
	off := 0
	take := func(name string, shape ...int) []float32 {
		n := 1
		for _, d := range shape {
			n *= d
		}
		v := p.Data[off : off+n : off+n]
		off += n
		p.Names = append(p.Names, ParamInfo{Name: name, Shape: shape, Data: v})
		return v
	}
	p.Embed = take("model.embed_tokens.weight", c.V, c.C)
	p.Layers = make([]LayerParams, c.L)
	for l := range p.Layers {
		pre := fmt.Sprintf("model.layers.%d.", l)
		lp := &p.Layers[l]
		lp.LN1 = take(pre+"input_layernorm.weight", c.C)
		QKV := (c.NH + 2*c.NKV) * c.HD
		lp.wqkv = p.Data[off : off+QKV*c.C : off+QKV*c.C]
		lp.WQ = take(pre+"self_attn.q_proj.weight", c.NH*c.HD, c.C)
		lp.WK = take(pre+"self_attn.k_proj.weight", c.NKV*c.HD, c.C)
		lp.WV = take(pre+"self_attn.v_proj.weight", c.NKV*c.HD, c.C)
		if c.QKVBias {
			lp.bqkv = p.Data[off : off+QKV : off+QKV]
			lp.BQ = take(pre+"self_attn.q_proj.bias", c.NH*c.HD)
			lp.BK = take(pre+"self_attn.k_proj.bias", c.NKV*c.HD)
			lp.BV = take(pre+"self_attn.v_proj.bias", c.NKV*c.HD)
		}
		lp.WO = take(pre+"self_attn.o_proj.weight", c.C, c.NH*c.HD)
		if c.QKNorm {
			lp.QNorm = take(pre+"self_attn.q_norm.weight", c.HD)
			lp.KNorm = take(pre+"self_attn.k_norm.weight", c.HD)
		}
		lp.LN2 = take(pre+"post_attention_layernorm.weight", c.C)
		if c.Sandwich {
			lp.PreFFN = take(pre+"pre_feedforward_layernorm.weight", c.C)
			lp.PostFFN = take(pre+"post_feedforward_layernorm.weight", c.C)
		}
		lp.wgu = p.Data[off : off+2*c.F*c.C : off+2*c.F*c.C]
		lp.WGate = take(pre+"mlp.gate_proj.weight", c.F, c.C)
		lp.WUp = take(pre+"mlp.up_proj.weight", c.F, c.C)
		lp.WDown = take(pre+"mlp.down_proj.weight", c.C, c.F)
	}
	p.NormF = take("model.norm.weight", c.C)
	if c.Tied {
		p.LMHead = p.Embed
	} else {
		p.LMHead = take("lm_head.weight", c.V, c.C)
	}
	if off != len(p.Data) {
		panic(fmt.Sprintf("model: parameter layout covers %d of %d floats", off, len(p.Data)))
	}
	return p
}

// Get returns the view of the named tensor, or nil.
func (p *Params) Get(name string) []float32 {
	for _, n := range p.Names {
		if n.Name == name {
			return n.Data
		}
	}
	return nil
}

// Load copies a checkpoint's tensors into p, checking that every expected
// tensor is present with the expected shape and that no tensor is left over.
// A tied model accepts (and ignores) an lm_head.weight equal in shape to the
// embedding, as some exporters write it anyway.
func (p *Params) Load(ck *weights.Checkpoint) error {
	src := ck.Source
	seen := map[string]bool{}
	p.Changed() // even a failed load may have copied some tensors
	for _, n := range p.Names {
		t, ok := ck.Tensors[n.Name]
		if !ok {
			return fmt.Errorf("model: %s: tensor %s is missing", src, n.Name)
		}
		if !slices.Equal(t.Shape, n.Shape) {
			return fmt.Errorf("model: %s: tensor %s has shape %v, want %v", src, n.Name, t.Shape, n.Shape)
		}
		if len(t.Data) != len(n.Data) {
			return fmt.Errorf("model: %s: tensor %s has %d values, want %d", src, n.Name, len(t.Data), len(n.Data))
		}
		p.be.Upload(n.Data, t.Data)
		seen[n.Name] = true
	}
	var extra []string
	for name, t := range ck.Tensors {
		if seen[name] {
			continue
		}
		if name == "lm_head.weight" && len(p.Names) > 0 && slices.Equal(t.Shape, p.Names[0].Shape) {
			continue // tied: the embedding is used
		}
		if strings.HasSuffix(name, "rotary_emb.inv_freq") {
			continue // a buffer older transformers versions saved
		}
		extra = append(extra, name)
	}
	if len(extra) > 0 {
		slices.Sort(extra)
		return fmt.Errorf("model: %s: unexpected tensors %v", src, extra)
	}
	return nil
}

// Checkpoint returns the parameters as a weights.Checkpoint (host copies:
// one download), with the Hugging Face names and shapes, ready to be saved.
func (p *Params) Checkpoint(hf weights.Config) *weights.Checkpoint {
	ck := &weights.Checkpoint{Config: hf, Tensors: map[string]*weights.Tensor{}}
	all := p.Host()
	off := 0 // Names lie one after another in Data
	for _, n := range p.Names {
		ck.Tensors[n.Name] = &weights.Tensor{Shape: slices.Clone(n.Shape), Data: all[off : off+len(n.Data) : off+len(n.Data)]}
		off += len(n.Data)
	}
	return ck
}

// Host returns a host copy of Data (one download on a GPU backend).
func (p *Params) Host() []float32 {
	h := make([]float32, len(p.Data))
	p.be.Download(h, p.Data)
	return h
}

// Upload writes host data (len(p.Data) floats, in the flat layout) into
// the parameters.
func (p *Params) Upload(data []float32) {
	p.be.Upload(p.Data, data)
	p.Changed()
}
