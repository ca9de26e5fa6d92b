// Package weights holds a model checkpoint in memory as fp32 tensors with Hugging Face names
// and shapes, independent of the file format it came from (HF safetensors or GGUF).
//
// Tensor names are those of transformers' state dicts (Llama, Qwen2, Qwen3, Mistral, Gemma 3
// text), for example
// "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "lm_head.weight".
// Linear weights are [out, in], row-major, exactly as transformers stores them.
package weights

// Config is the subset of a Hugging Face config.json that the decoder families need (see
// [Families]). Keys keep transformers' names; a zero value is the key's absence (null), and
// [ParseConfig] fills in what transformers' config class of the family defaults to.
type Config struct {
	Architectures         []string `json:"architectures"`
	ModelType             string   `json:"model_type"` // one of Families' model types
	HiddenSize            int      `json:"hidden_size"`
	IntermediateSize      int      `json:"intermediate_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	NumAttentionHeads     int      `json:"num_attention_heads"`
	NumKeyValueHeads      int      `json:"num_key_value_heads"`
	HeadDim               int      `json:"head_dim,omitempty"` // 0 means HiddenSize/NumAttentionHeads
	VocabSize             int      `json:"vocab_size"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`
	RMSNormEps            float64  `json:"rms_norm_eps"`
	RopeTheta             float64  `json:"rope_theta"`
	TieWordEmbeddings     bool     `json:"tie_word_embeddings"`
	AttentionBias         bool     `json:"attention_bias"` // q/k/v bias (always true for qwen2)
	BOSTokenID            int      `json:"bos_token_id"`
	EOSTokenID            int      `json:"eos_token_id"` // the first of EOSTokenIDs
	// EOSTokenIDs is every end-of-sequence id the checkpoint declares, in order, each once:
	// config.json's eos_token_id (an id or a list), then the ids of generation_config.json's
	// that config.json lacks; a GGUF's tokenizer.ggml.eos_token_id. Generation stops at any
	// of them. A Config made by hand may leave it nil: [Config.EOSIDs] is then EOSTokenID.
	EOSTokenIDs []int `json:"-"`
	// NoEOS: the files gave no eos id (config.json's and generation_config.json's
	// eos_token_id absent, null or [], a GGUF without tokenizer.ggml.eos_token_id);
	// EOSTokenID is then 0, not an id to stop at, and EOSTokenIDs is empty.
	NoEOS      bool   `json:"-"`
	HiddenAct  string `json:"hidden_act"` // "silu", or gemma3_text's "gelu_pytorch_tanh"
	TorchDtype string `json:"torch_dtype,omitempty"`

	// HiddenActivation is gemma3_text's name for the MLP's activation (its hidden_act is
	// ignored by transformers): "gelu_pytorch_tanh".
	HiddenActivation string `json:"hidden_activation,omitempty"`
	// RopeScaling rescales the RoPE frequencies of the (global) attention layers: llama3,
	// linear or yarn; nil is plain RoPE. transformers 5's rope_parameters is read into it too.
	RopeScaling *RopeScaling `json:"rope_scaling,omitempty"`
	// SlidingWindow is how many positions a sliding-window layer's query sees, its own
	// included (mistral: every layer; gemma3_text: the "sliding_attention" layers; qwen2 and
	// qwen3 only with UseSlidingWindow). 0: none.
	SlidingWindow    int  `json:"sliding_window,omitempty"`
	UseSlidingWindow bool `json:"use_sliding_window,omitempty"` // qwen2, qwen3
	MaxWindowLayers  int  `json:"max_window_layers,omitempty"`  // qwen2, qwen3: layers from this index slide
	// LayerTypes is each layer's attention, "full_attention" or "sliding_attention"
	// (transformers writes it since 4.53); [Config.SlidingLayers] derives it when absent.
	LayerTypes []string `json:"layer_types,omitempty"`
	// SlidingWindowPattern: gemma3_text's older key, every Nth layer is global (6).
	SlidingWindowPattern int `json:"sliding_window_pattern,omitempty"`
	// QueryPreAttnScalar: gemma3_text scales attention scores by its -1/2 power, not head_dim's.
	QueryPreAttnScalar float64 `json:"query_pre_attn_scalar,omitempty"`
	// RopeLocalBaseFreq: gemma3_text's RoPE base of its sliding-window layers.
	RopeLocalBaseFreq float64 `json:"rope_local_base_freq,omitempty"`
	// FinalLogitSoftcapping and AttnLogitSoftcapping (gemma3_text; null there by default):
	// logits = cap * tanh(logits / cap). 0: none.
	FinalLogitSoftcapping float64 `json:"final_logit_softcapping,omitempty"`
	AttnLogitSoftcapping  float64 `json:"attn_logit_softcapping,omitempty"`
}

// RopeScaling is a config's rope_scaling (transformers 4) or rope_parameters (5): how the
// inverse frequencies of RoPE are rescaled for longer contexts (transformers'
// modeling_rope_utils.py). Type is "llama3", "linear" or "yarn"; the rest are that type's
// parameters, 0 where the config leaves them out.
type RopeScaling struct {
	Type                          string  `json:"rope_type"`
	Factor                        float64 `json:"factor,omitempty"`
	LowFreqFactor                 float64 `json:"low_freq_factor,omitempty"`                  // llama3
	HighFreqFactor                float64 `json:"high_freq_factor,omitempty"`                 // llama3
	OriginalMaxPositionEmbeddings int     `json:"original_max_position_embeddings,omitempty"` // llama3, yarn
	AttentionFactor               float64 `json:"attention_factor,omitempty"`                 // yarn
	BetaFast                      float64 `json:"beta_fast,omitempty"`                        // yarn (32)
	BetaSlow                      float64 `json:"beta_slow,omitempty"`                        // yarn (1)
	Mscale                        float64 `json:"mscale,omitempty"`                           // yarn
	MscaleAllDim                  float64 `json:"mscale_all_dim,omitempty"`                   // yarn
	Truncate                      *bool   `json:"truncate,omitempty"`                         // yarn (true)
}

// EOSIDs is every end-of-sequence id of c (see EOSTokenIDs): none with NoEOS, EOSTokenID
// alone when EOSTokenIDs is empty.
func (c Config) EOSIDs() []int {
	switch {
	case c.NoEOS:
		return nil
	case len(c.EOSTokenIDs) > 0:
		return c.EOSTokenIDs
	}
	return []int{c.EOSTokenID}
}

// Tensor is a dense row-major fp32 tensor.
type Tensor struct {
	Shape []int
	Data  []float32
}

// Checkpoint is a whole model: its config and its named tensors.
type Checkpoint struct {
	Config  Config
	Tensors map[string]*Tensor
	Source  string // the file or directory it was loaded from, for error messages
}
