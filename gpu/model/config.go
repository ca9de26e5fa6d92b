package model

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/rlhost/rlhost/gpu/weights"
)

// Activation is the MLP's gate activation.
type Activation int

const (
	// SiLU gates with silu(gate) * up: SwiGLU (Llama, Qwen, Mistral).
	SiLU Activation = iota
	// GELUTanh gates with PyTorch's tanh-approximated GELU: GeGLU (Gemma).
	GELUTanh
)

// Config is what the model math needs, derived from a Hugging Face config.
// The zero values of the family options are Llama's, so a Config written by
// hand for a Llama or Qwen2 shape needs none of them.
type Config struct {
	Family    string  // the config's model_type: "llama", "qwen2", "qwen3", "mistral" or "gemma3_text"
	V         int     // vocabulary size
	C         int     // hidden size
	F         int     // intermediate (feed-forward) size
	L         int     // layers
	NH, NKV   int     // query heads, key/value heads
	HD        int     // head dimension
	MaxPos    int     // rows of the RoPE tables
	Eps       float32 // RMSNorm epsilon
	RopeTheta float64 // RoPE base (of the full-attention layers)
	Tied      bool    // lm_head shares model.embed_tokens.weight
	QKVBias   bool    // q/k/v projections have a bias (always for qwen2)
	BOS       int
	EOS       int // the first end-of-sequence id; -1: none
	// MoreEOS are the checkpoint's further end-of-sequence ids (a config.json eos_token_id
	// list past its first, generation_config.json's): generation stops at EOS and at each.
	MoreEOS []int

	// Family options (docs/models.md).
	QKNorm     bool       // q_norm, k_norm [HD]: RMSNorm of each head of q and k before RoPE (qwen3, gemma3_text)
	NormOffset float32    // every RMSNorm scales by NormOffset + weight (gemma3_text: 1)
	Sandwich   bool       // gemma3_text: norms on the attention's and the MLP's outputs before their residual adds, and a pre-MLP norm
	Act        Activation // the MLP's gate
	EmbedScale float32    // the embedding rows are multiplied by it (gemma3_text: sqrt(C)); 0: 1
	// QScale multiplies the queries before attention, whose scores the ops scale by
	// 1/sqrt(HD): gemma3_text's query_pre_attn_scalar^-1/2 is QScale/sqrt(HD). 0: 1.
	QScale float32
	// Windows is each layer's sliding window (gpu.Backend's window: a query sees the
	// last Windows[l] positions, its own included); 0 or a nil Windows: every position.
	Windows []int
	// LocalRopeTheta is the RoPE base of the sliding-window layers (gemma3_text's
	// rope_local_base_freq); 0: every layer uses RopeTheta.
	LocalRopeTheta float64
	// RopeScaling rescales the full-attention layers' RoPE frequencies (llama3, linear,
	// yarn); nil: plain RoPE.
	RopeScaling *weights.RopeScaling
	// FinalSoftcap soft-caps the logits, cap*tanh(logits/cap) (gemma3_text's
	// final_logit_softcapping); 0: none.
	FinalSoftcap float32
}

// Window is layer l's sliding window, 0 for full attention.
func (c Config) Window(l int) int {
	if l < len(c.Windows) {
		return c.Windows[l]
	}
	return 0
}

// localRope reports whether layer l uses the local RoPE tables.
func (c Config) localRope(l int) bool { return c.LocalRopeTheta > 0 && c.Window(l) > 0 }

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
// An architecture or option the models do not compute is an error naming the key, its
// value and the nearest supported family.
func ConfigFrom(hf weights.Config) (Config, error) {
	family := strings.ToLower(hf.ModelType)
	if family == "" && len(hf.Architectures) > 0 {
		for _, f := range weights.Families {
			if f.Architecture == hf.Architectures[0] {
				family = f.ModelType
			}
		}
	}
	hf.ModelType = family
	fam := hf.Family()
	if fam == nil {
		types := make([]string, len(weights.Families))
		for i, f := range weights.Families {
			types[i] = f.ModelType
		}
		return Config{}, fmt.Errorf("model: unsupported architecture %q (model_type %q); supported: %s", hf.Architectures, hf.ModelType, strings.Join(types, ", "))
	}
	act := SiLU
	switch a := hf.Activation(); {
	case a == "" && fam.Activation == "silu", a == fam.Activation && a == "silu":
	case a == fam.Activation && a == "gelu_pytorch_tanh":
		act = GELUTanh
	default:
		return Config{}, fmt.Errorf("model: unsupported hidden_act %q for %s; want %s", a, family, fam.Activation)
	}
	if hf.AttnLogitSoftcapping != 0 {
		return Config{}, fmt.Errorf("model: attn_logit_softcapping = %v is not supported (attention scores are not soft-capped)", hf.AttnLogitSoftcapping)
	}
	c := Config{
		Family: family, V: hf.VocabSize, C: hf.HiddenSize, F: hf.IntermediateSize,
		L: hf.NumHiddenLayers, NH: hf.NumAttentionHeads, NKV: hf.NumKeyValueHeads,
		HD: hf.HeadDim, MaxPos: hf.MaxPositionEmbeddings, Eps: float32(hf.RMSNormEps),
		RopeTheta: hf.RopeTheta, Tied: hf.TieWordEmbeddings,
		QKVBias: hf.AttentionBias || family == "qwen2",
		BOS:     hf.BOSTokenID, EOS: -1,
		QKNorm: fam.QKNorm, Sandwich: fam.Sandwich, Act: act,
		RopeScaling: hf.RopeScaling, FinalSoftcap: float32(hf.FinalLogitSoftcapping),
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
	if family == "gemma3_text" {
		c.NormOffset = 1
		c.EmbedScale = float32(math.Sqrt(float64(c.C)))
		c.LocalRopeTheta = hf.RopeLocalBaseFreq
		if hf.QueryPreAttnScalar > 0 && c.HD > 0 {
			c.QScale = float32(math.Sqrt(float64(c.HD) / hf.QueryPreAttnScalar))
		}
	}
	windows, err := hf.SlidingLayers()
	if err != nil {
		return Config{}, fmt.Errorf("model: %w", err)
	}
	if slices.ContainsFunc(windows, func(w int) bool { return w > 0 }) {
		c.Windows = windows
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
	if c.LocalRopeTheta < 0 {
		return Config{}, fmt.Errorf("model: rope_local_base_freq %v, want > 0", c.LocalRopeTheta)
	}
	if c.Eps <= 0 {
		return Config{}, fmt.Errorf("model: rms_norm_eps %v, want > 0", hf.RMSNormEps)
	}
	if c.FinalSoftcap < 0 {
		return Config{}, fmt.Errorf("model: final_logit_softcapping %v, want > 0", c.FinalSoftcap)
	}
	if _, _, err := ropeInvFreq(c.HD, c.RopeTheta, c.RopeScaling, c.MaxPos); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Describe names the family and its shape in one line, for the commands that load a model.
func (c Config) Describe() string {
	s := fmt.Sprintf("%s: %d layers, hidden %d, %d heads (%d key/value) of %d, vocabulary %d", c.Family, c.L, c.C, c.NH, c.NKV, c.HD, c.V)
	if n := len(slices.DeleteFunc(slices.Clone(c.Windows), func(w int) bool { return w == 0 })); n > 0 {
		s += fmt.Sprintf(", %d of %d layers with a sliding window of %d", n, c.L, slices.Max(c.Windows))
	}
	if c.RopeScaling != nil {
		s += ", RoPE scaling " + c.RopeScaling.Type
	}
	return s
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
	if c.QKNorm {
		per += 2 * c.HD
	}
	if c.Sandwich {
		per += 2 * c.C
	}
	return n + c.L*per
}
