package weights

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Family is what the loader knows of a decoder family: its names in config.json and what its
// layers hold beyond Llama's. gpu/model computes each one (docs/models.md).
type Family struct {
	ModelType    string // config.json's model_type
	Architecture string // transformers' class, config.json's architectures[0]
	Activation   string // the MLP's activation: "silu" (SwiGLU) or "gelu_pytorch_tanh" (GeGLU)
	QKNorm       bool   // q_norm and k_norm: RMSNorm over each head's channels before RoPE
	Sandwich     bool   // gemma: norms on the attention's and the MLP's outputs, and a pre-MLP norm
}

// Families are the supported decoder families, in the order docs/models.md lists them.
var Families = []Family{
	{ModelType: "llama", Architecture: "LlamaForCausalLM", Activation: "silu"},
	{ModelType: "qwen2", Architecture: "Qwen2ForCausalLM", Activation: "silu"},
	{ModelType: "qwen3", Architecture: "Qwen3ForCausalLM", Activation: "silu", QKNorm: true},
	{ModelType: "mistral", Architecture: "MistralForCausalLM", Activation: "silu"},
	{ModelType: "gemma3_text", Architecture: "Gemma3ForCausalLM", Activation: "gelu_pytorch_tanh", QKNorm: true, Sandwich: true},
}

// nearestFamily names, for a model_type rlhost does not load, the supported family closest
// to it and what is missing.
var nearestFamily = map[string]string{
	"gemma":       "gemma3_text (Gemma 1 is not supported)",
	"gemma2":      "gemma3_text (Gemma 2's attention soft-capping is not supported)",
	"gemma3":      "gemma3_text: load the text model (Gemma3ForCausalLM); the vision tower of Gemma3ForConditionalGeneration is not supported",
	"gemma3n":     "gemma3_text (Gemma 3n's per-layer embeddings are not supported)",
	"qwen3_moe":   "qwen3 (mixture-of-experts layers are not supported yet)",
	"qwen2_moe":   "qwen2 (mixture-of-experts layers are not supported yet)",
	"olmoe":       "qwen3 (mixture-of-experts layers are not supported yet)",
	"mixtral":     "mistral (mixture-of-experts layers are not supported yet)",
	"mistral3":    "mistral (Mistral 3's vision tower is not supported; load its text model)",
	"qwen2_vl":    "qwen2 (vision-language models are not supported)",
	"qwen2_5_vl":  "qwen2 (vision-language models are not supported)",
	"qwen3_vl":    "qwen3 (vision-language models are not supported)",
	"llama4":      "llama (Llama 4's experts and chunked attention are not supported)",
	"mllama":      "llama (vision-language models are not supported)",
	"phi3":        "llama (Phi-3's fused projections and longrope are not supported)",
	"granite":     "llama (Granite's multipliers are not supported)",
	"smollm3":     "llama (SmolLM3's no-RoPE layers are not supported)",
	"olmo2":       "llama (OLMo 2's norm placement is not supported)",
	"deepseek_v3": "qwen3 (multi-head latent attention and experts are not supported)",
	"gpt_oss":     "qwen3 (experts and attention sinks are not supported)",
}

// familyOf is the family of a model_type (lower-cased), or nil.
func familyOf(modelType string) *Family {
	mt := strings.ToLower(modelType)
	for i := range Families {
		if Families[i].ModelType == mt {
			return &Families[i]
		}
	}
	return nil
}

// familyOfArchitecture is the family of a transformers class name, or nil.
func familyOfArchitecture(arch string) *Family {
	for i := range Families {
		if Families[i].Architecture == arch {
			return &Families[i]
		}
	}
	return nil
}

// Family is the family of c's model_type, or nil when rlhost does not load it.
func (c Config) Family() *Family { return familyOf(c.ModelType) }

// unsupportedFamily is the one-line error for a model_type no family has, naming the nearest.
func unsupportedFamily(c Config) error {
	types := make([]string, len(Families))
	for i, f := range Families {
		types[i] = f.ModelType
	}
	msg := fmt.Sprintf("unsupported architecture: model_type %q (architectures %v); supported: %s", c.ModelType, c.Architectures, strings.Join(types, ", "))
	if n, ok := nearestFamily[strings.ToLower(c.ModelType)]; ok {
		msg += "; nearest: " + n
	}
	return fmt.Errorf("%s", msg)
}

// Activation is the MLP's activation function as transformers reads it: gemma3_text's
// hidden_activation when set, else hidden_act.
func (c Config) Activation() string {
	if c.HiddenActivation != "" {
		return c.HiddenActivation
	}
	return c.HiddenAct
}

// defaults fills in what transformers' config class of the family defaults a key to when
// config.json leaves it out (has: the key is present and not null; present: present, null
// included, which for sliding_window means no window).
func (f *Family) defaults(c *Config, has, present func(string) bool) {
	set := func(key string, apply func()) {
		if !has(key) {
			apply()
		}
	}
	switch f.ModelType {
	case "qwen3":
		set("head_dim", func() { c.HeadDim = 128 })
		set("rms_norm_eps", func() { c.RMSNormEps = 1e-6 })
		if c.UseSlidingWindow {
			set("max_window_layers", func() { c.MaxWindowLayers = 28 })
		}
	case "qwen2":
		set("rms_norm_eps", func() { c.RMSNormEps = 1e-6 })
		if c.UseSlidingWindow {
			set("max_window_layers", func() { c.MaxWindowLayers = 28 })
		}
	case "mistral":
		if !present("sliding_window") {
			c.SlidingWindow = 4096
		}
		set("rms_norm_eps", func() { c.RMSNormEps = 1e-6 })
	case "llama":
		set("rms_norm_eps", func() { c.RMSNormEps = 1e-6 })
	case "gemma3_text":
		set("head_dim", func() { c.HeadDim = 256 })
		set("rms_norm_eps", func() { c.RMSNormEps = 1e-6 })
		set("rope_theta", func() { c.RopeTheta = 1e6 })
		set("rope_local_base_freq", func() { c.RopeLocalBaseFreq = 10000 })
		set("query_pre_attn_scalar", func() { c.QueryPreAttnScalar = 256 })
		set("tie_word_embeddings", func() { c.TieWordEmbeddings = true })
		set("hidden_activation", func() { c.HiddenActivation = "gelu_pytorch_tanh" })
		set("sliding_window", func() { c.SlidingWindow = 4096 })
		if !has("layer_types") {
			set("sliding_window_pattern", func() { c.SlidingWindowPattern = 6 })
		}
	}
}

// SlidingLayers is each layer's attention window (see SlidingWindow): 0 for a layer that sees
// every earlier position. It follows transformers: layer_types when the config has them;
// else mistral slides every layer, gemma3_text every layer but each sliding_window_pattern-th,
// qwen2 and qwen3 (with use_sliding_window) the layers from max_window_layers on.
func (c Config) SlidingLayers() ([]int, error) {
	w := make([]int, c.NumHiddenLayers)
	if c.NumHiddenLayers < 0 || c.NumHiddenLayers > maxLayers {
		return nil, fmt.Errorf("num_hidden_layers = %d is out of range", c.NumHiddenLayers)
	}
	if len(c.LayerTypes) > 0 {
		if len(c.LayerTypes) != c.NumHiddenLayers {
			return nil, fmt.Errorf("layer_types has %d entries for %d layers", len(c.LayerTypes), c.NumHiddenLayers)
		}
		for l, t := range c.LayerTypes {
			switch t {
			case "full_attention":
			case "sliding_attention":
				if c.SlidingWindow <= 0 {
					return nil, fmt.Errorf("layer_types[%d] = %q but sliding_window is not set", l, t)
				}
				w[l] = c.SlidingWindow
			default:
				return nil, fmt.Errorf("layer_types[%d] = %q is not supported (want full_attention or sliding_attention)", l, t)
			}
		}
		if (c.ModelType == "qwen2" || c.ModelType == "qwen3") && !c.UseSlidingWindow {
			clear(w) // transformers' qwen configs set the window to None without use_sliding_window
		}
		return w, nil
	}
	if c.SlidingWindow <= 0 {
		return w, nil
	}
	switch c.ModelType {
	case "mistral":
		for l := range w {
			w[l] = c.SlidingWindow
		}
	case "gemma3_text":
		p := c.SlidingWindowPattern
		if p <= 0 {
			p = 6
		}
		for l := range w {
			if (l+1)%p != 0 {
				w[l] = c.SlidingWindow
			}
		}
	case "qwen2", "qwen3":
		if c.UseSlidingWindow {
			for l := max(c.MaxWindowLayers, 0); l < len(w); l++ {
				w[l] = c.SlidingWindow
			}
		}
	}
	return w, nil
}

// canonicalWindows drops what does not change the model: a qwen config's window keys
// without use_sliding_window, and layer_types that only say every layer is full attention.
// Configs from config.json and from GGUF metadata then compare equal.
func canonicalWindows(c *Config) {
	if (c.ModelType == "qwen2" || c.ModelType == "qwen3") && !c.UseSlidingWindow {
		c.SlidingWindow, c.MaxWindowLayers = 0, 0
	}
	if !slices.ContainsFunc(c.LayerTypes, func(t string) bool { return t != "full_attention" }) && c.ModelType != "gemma3_text" {
		c.LayerTypes = nil
	}
}

// RopeTypes are the RoPE scalings the models implement (transformers' rope_type names).
var RopeTypes = []string{"default", "linear", "llama3", "yarn"}

// parseRope reads rope_scaling (transformers 4) and rope_parameters (5) into c: the global
// layers' base (rope_theta) and scaling, and for gemma3_text's per-layer-type form the local
// base of the sliding layers.
func parseRope(c *Config, scaling, params json.RawMessage) error {
	read := func(key string, raw json.RawMessage) error {
		if len(raw) == 0 || string(raw) == "null" {
			return nil
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return fmt.Errorf("%s: %w", key, err)
		}
		// gemma3_text in transformers 5: one set of parameters per layer type
		if full, ok := m["full_attention"]; ok {
			if err := readRope(c, key+".full_attention", full, false); err != nil {
				return err
			}
			if sl, ok := m["sliding_attention"]; ok {
				return readRope(c, key+".sliding_attention", sl, true)
			}
			return nil
		}
		return readRope(c, key, raw, false)
	}
	if err := read("rope_scaling", scaling); err != nil {
		return err
	}
	return read("rope_parameters", params)
}

// readRope reads one set of RoPE parameters: into c's global ones, or (local) the sliding
// layers' base, which must not be scaled.
func readRope(c *Config, key string, raw json.RawMessage, local bool) error {
	var r struct {
		RopeScaling
		Type      string  `json:"type"`
		RopeTheta float64 `json:"rope_theta"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	t := r.RopeScaling.Type
	if t == "" {
		t = r.Type
	}
	if t == "" {
		t = "default"
	}
	if !slices.Contains(RopeTypes, t) {
		return fmt.Errorf("%s.rope_type = %q is not supported (supported: %s)", key, t, strings.Join(RopeTypes, ", "))
	}
	if local {
		if t != "default" {
			return fmt.Errorf("%s.rope_type = %q: scaling the sliding layers' RoPE is not supported", key, t)
		}
		if r.RopeTheta > 0 {
			c.RopeLocalBaseFreq = r.RopeTheta
		}
		return nil
	}
	if r.RopeTheta > 0 {
		c.RopeTheta = r.RopeTheta
	}
	if t == "default" {
		return nil
	}
	s := r.RopeScaling
	s.Type = t
	switch {
	case s.Factor <= 0 || s.Factor > 1<<20:
		return fmt.Errorf("%s: %s needs factor > 0, got %v", key, t, s.Factor)
	case t == "llama3" && (s.LowFreqFactor <= 0 || s.HighFreqFactor <= s.LowFreqFactor || s.OriginalMaxPositionEmbeddings <= 0):
		return fmt.Errorf("%s: llama3 needs 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0, got %v, %v, %d",
			key, s.LowFreqFactor, s.HighFreqFactor, s.OriginalMaxPositionEmbeddings)
	case s.OriginalMaxPositionEmbeddings < 0 || s.AttentionFactor < 0 || s.BetaFast < 0 || s.BetaSlow < 0:
		return fmt.Errorf("%s: negative parameter", key)
	}
	c.RopeScaling = &s
	return nil
}
