// Package weights holds a model checkpoint in memory as fp32 tensors with Hugging Face names
// and shapes, independent of the file format it came from (HF safetensors or GGUF).
//
// Tensor names are those of transformers' Llama/Qwen2 state dicts, for example
// "model.embed_tokens.weight", "model.layers.0.self_attn.q_proj.weight", "lm_head.weight".
// Linear weights are [out, in], row-major, exactly as transformers stores them.
package weights

// Config is the subset of a Hugging Face config.json that Llama and Qwen2 models need.
type Config struct {
	Architectures         []string `json:"architectures"`
	ModelType             string   `json:"model_type"` // "llama" | "qwen2"
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
	HiddenAct  string `json:"hidden_act"` // "silu"
	TorchDtype string `json:"torch_dtype,omitempty"`
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
