package model

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rlhost/rlhost/gpu/weights"
)

// Config is what the model math needs, derived from a Hugging Face config.
type Config struct {
	Family    string  // "llama" or "qwen2"
	V         int     // vocabulary size
	C         int     // hidden size
	F         int     // intermediate (feed-forward) size
	L         int     // layers
	NH, NKV   int     // query heads, key/value heads
	HD        int     // head dimension
	MaxPos    int     // rows of the RoPE tables
	Eps       float32 // RMSNorm epsilon
	RopeTheta float64 // RoPE base
	Tied      bool    // lm_head shares model.embed_tokens.weight
	QKVBias   bool    // q/k/v projections have a bias (always for qwen2)
	BOS       int
	EOS       int // the first end-of-sequence id; -1: none
	// MoreEOS are the checkpoint's further end-of-sequence ids (a config.json eos_token_id
	// list past its first, generation_config.json's): generation stops at EOS and at each.
	MoreEOS []int
}

// EOSIDs is every id generation stops at unless told to ignore eos: EOS (when it is an id)
// and MoreEOS.
func (c Config) EOSIDs() []int32 {
	ids := make([]int32, 0, 1+len(c.MoreEOS))
	for _, id := range append([]int{c.EOS}, c.MoreEOS...) {
		if id >= 0 && id <= math.MaxInt32 && !slices.Contains(ids, int32(id)) {
			ids = append(ids, int32(id))
		}
	}
	return ids
}

// ConfigFrom validates a Hugging Face config and derives the model's. Its eos ids
// ([weights.Config.EOSIDs]) become EOS and MoreEOS; none is EOS -1 (see [Model.FallBackEOS]).
func ConfigFrom(hf weights.Config) (Config, error) {
	family := strings.ToLower(hf.ModelType)
	if family == "" && len(hf.Architectures) > 0 {
		switch hf.Architectures[0] {
		case "LlamaForCausalLM":
			family = "llama"
		case "Qwen2ForCausalLM":
			family = "qwen2"
		}
	}
	if family != "llama" && family != "qwen2" {
		return Config{}, fmt.Errorf("model: unsupported architecture %q (model_type %q); want llama or qwen2", hf.Architectures, hf.ModelType)
	}
	if hf.HiddenAct != "" && hf.HiddenAct != "silu" {
		return Config{}, fmt.Errorf("model: unsupported hidden_act %q; want silu", hf.HiddenAct)
	}
	c := Config{
		Family: family, V: hf.VocabSize, C: hf.HiddenSize, F: hf.IntermediateSize,
		L: hf.NumHiddenLayers, NH: hf.NumAttentionHeads, NKV: hf.NumKeyValueHeads,
		HD: hf.HeadDim, MaxPos: hf.MaxPositionEmbeddings, Eps: float32(hf.RMSNormEps),
		RopeTheta: hf.RopeTheta, Tied: hf.TieWordEmbeddings,
		QKVBias: hf.AttentionBias || family == "qwen2",
		BOS:     hf.BOSTokenID, EOS: -1,
	}
	if ids := hf.EOSIDs(); len(ids) > 0 {
		c.EOS = ids[0]
		if len(ids) > 1 {
			c.MoreEOS = slices.Clone(ids[1:])
		}
	}
	if c.NKV == 0 {
		c.NKV = c.NH
	}
	if c.HD == 0 && c.NH > 0 {
		c.HD = c.C / c.NH
	}
	if c.MaxPos == 0 {
		c.MaxPos = 4096
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"vocab_size", c.V}, {"hidden_size", c.C}, {"intermediate_size", c.F},
		{"num_hidden_layers", c.L}, {"num_attention_heads", c.NH}, {"num_key_value_heads", c.NKV}, {"head_dim", c.HD}} {
		if f.v <= 0 {
			return Config{}, fmt.Errorf("model: config %s = %d, want > 0", f.name, f.v)
		}
	}
	if c.NH%c.NKV != 0 {
		return Config{}, fmt.Errorf("model: num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NH, c.NKV)
	}
	if c.HD%2 != 0 {
		return Config{}, fmt.Errorf("model: head_dim %d is odd; RoPE needs pairs", c.HD)
	}
	if c.RopeTheta <= 0 {
		return Config{}, fmt.Errorf("model: rope_theta %v, want > 0", c.RopeTheta)
	}
	if c.Eps <= 0 {
		return Config{}, fmt.Errorf("model: rms_norm_eps %v, want > 0", hf.RMSNormEps)
	}
	return c, nil
}

// NumParams is the number of distinct parameters (a tied lm_head counts once).
func (c Config) NumParams() int {
	n := c.V*c.C + c.C
	if !c.Tied {
		n += c.V * c.C
	}
	per := 2*c.C + c.NH*c.HD*c.C*2 + 2*c.NKV*c.HD*c.C + 3*c.C*c.F
	if c.QKVBias {
		per += c.NH*c.HD + 2*c.NKV*c.HD
	}
	return n + c.L*per
}
