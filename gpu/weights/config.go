package weights

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// ParseConfig decodes a Hugging Face config.json, from transformers 4 or 5: rope_theta may sit
// at the top level or in rope_parameters, eos_token_id may be an id, a list of ids (every one
// is kept, in EOSTokenIDs) or null, and ids may be null. Keys a family's config class has a
// default for are filled in when absent (save_pretrained leaves some out), so the result is
// what transformers builds from the same file. RoPE scaling of the types [RopeScaling] names is
// read from rope_scaling or rope_parameters (flat, or per layer type as gemma3_text's); other
// types and options the models do not implement are errors naming the key. name is used in
// error messages. generation_config.json is not read here: [Load] adds its eos ids.
func ParseConfig(name string, b []byte) (Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return Config{}, fmt.Errorf("weights: %s: %w", name, err)
	}
	eos, err := parseEOS(name, raw["eos_token_id"])
	if err != nil {
		return Config{}, err
	}
	delete(raw, "eos_token_id")
	// rope_scaling and rope_parameters are read by parseRope, from raw
	ropeScaling, ropeParams := raw["rope_scaling"], raw["rope_parameters"]
	delete(raw, "rope_scaling")
	delete(raw, "rope_parameters")
	fixed, _ := json.Marshal(raw)
	var c Config
	if err := json.Unmarshal(fixed, &c); err != nil {
		return Config{}, fmt.Errorf("weights: %s: %w", name, err)
	}
	c.setEOS(eos)
	var extra struct {
		Dtype               string  `json:"dtype"`
		MLPBias             bool    `json:"mlp_bias"`
		PartialRotaryFactor float64 `json:"partial_rotary_factor"`
	}
	if err := json.Unmarshal(fixed, &extra); err != nil {
		return Config{}, fmt.Errorf("weights: %s: %w", name, err)
	}
	if extra.MLPBias {
		return Config{}, fmt.Errorf("weights: %s: mlp_bias = true is not supported", name)
	}
	if extra.PartialRotaryFactor != 0 && extra.PartialRotaryFactor != 1 {
		return Config{}, fmt.Errorf("weights: %s: partial_rotary_factor = %v is not supported (RoPE over the whole head only)", name, extra.PartialRotaryFactor)
	}
	if c.ModelType == "" && len(c.Architectures) > 0 {
		if f := familyOfArchitecture(c.Architectures[0]); f != nil {
			c.ModelType = f.ModelType
		}
	}
	if c.TorchDtype == "" {
		c.TorchDtype = extra.Dtype
	}
	has := func(key string) bool {
		v, ok := raw[key]
		return ok && string(v) != "null"
	}
	if f := familyOf(c.ModelType); f != nil {
		f.defaults(&c, has, func(key string) bool { _, ok := raw[key]; return ok })
	}
	if err := parseRope(&c, ropeScaling, ropeParams); err != nil {
		return Config{}, fmt.Errorf("weights: %s: %w", name, err)
	}
	if c.RopeTheta == 0 {
		c.RopeTheta = 10000 // transformers' default for llama, qwen2, qwen3 and mistral
	}
	if c.NumKeyValueHeads == 0 {
		c.NumKeyValueHeads = c.NumAttentionHeads
	}
	if c.HiddenAct == "" {
		c.HiddenAct = "silu"
		if f := c.Family(); f != nil {
			c.HiddenAct = f.Activation
		}
	}
	if strings.ToLower(c.ModelType) == "qwen2" {
		c.AttentionBias = true
	}
	canonicalWindows(&c)
	if err := checkConfig(c); err != nil {
		return Config{}, fmt.Errorf("weights: %s: %w", name, err)
	}
	c.HeadDim = headDim(c) // always explicit, whatever the source
	return c, nil
}

// Bounds on a config, so a hostile one cannot make the loader build huge tables.
const (
	maxLayers = 1024
	maxHeads  = 1024
)

// checkConfig rejects architectures, options and sizes the models cannot run.
func checkConfig(c Config) error {
	f := familyOf(c.ModelType)
	if f == nil {
		return unsupportedFamily(c)
	}
	if act := c.Activation(); act != f.Activation {
		key := "hidden_act"
		if c.HiddenActivation != "" {
			key = "hidden_activation"
		}
		return fmt.Errorf("unsupported %s %q for %s; want %s", key, act, c.ModelType, f.Activation)
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"hidden_size", c.HiddenSize}, {"intermediate_size", c.IntermediateSize}, {"num_hidden_layers", c.NumHiddenLayers},
		{"num_attention_heads", c.NumAttentionHeads}, {"num_key_value_heads", c.NumKeyValueHeads}, {"vocab_size", c.VocabSize}} {
		if f.v <= 0 || f.v > 1<<24 {
			return fmt.Errorf("%s = %d is out of range", f.name, f.v)
		}
	}
	if c.NumHiddenLayers > maxLayers || c.NumAttentionHeads > maxHeads {
		return fmt.Errorf("num_hidden_layers %d or num_attention_heads %d is beyond the supported %d and %d", c.NumHiddenLayers, c.NumAttentionHeads, maxLayers, maxHeads)
	}
	if c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		return fmt.Errorf("num_attention_heads %d is not a multiple of num_key_value_heads %d", c.NumAttentionHeads, c.NumKeyValueHeads)
	}
	if c.HeadDim == 0 && c.HiddenSize%c.NumAttentionHeads != 0 {
		return fmt.Errorf("hidden_size %d is not a multiple of num_attention_heads %d", c.HiddenSize, c.NumAttentionHeads)
	}
	if hd := headDim(c); hd%2 != 0 || hd <= 0 || hd > 1<<16 {
		return fmt.Errorf("head_dim %d must be even and positive", hd)
	}
	if c.HeadDim < 0 {
		return fmt.Errorf("head_dim = %d is negative", c.HeadDim)
	}
	if c.SlidingWindow < 0 {
		return fmt.Errorf("sliding_window = %d is negative", c.SlidingWindow)
	}
	if _, err := c.SlidingLayers(); err != nil {
		return err
	}
	if c.AttnLogitSoftcapping != 0 {
		return fmt.Errorf("attn_logit_softcapping = %v is not supported (attention scores are not soft-capped; Gemma 3 checkpoints leave it null)", c.AttnLogitSoftcapping)
	}
	if c.FinalLogitSoftcapping < 0 {
		return fmt.Errorf("final_logit_softcapping = %v is negative", c.FinalLogitSoftcapping)
	}
	if c.QueryPreAttnScalar < 0 {
		return fmt.Errorf("query_pre_attn_scalar = %v is negative", c.QueryPreAttnScalar)
	}
	return nil
}

func headDim(c Config) int {
	if c.HeadDim > 0 {
		return c.HeadDim
	}
	return c.HiddenSize / c.NumAttentionHeads
}

// ExpectedShapes lists every tensor a checkpoint of config c holds, with its shape:
// lm_head.weight only when the embeddings are not tied, q/k/v biases only with attention_bias
// (always for qwen2), q_norm and k_norm for qwen3 and gemma3_text, and gemma3_text's pre- and
// post-feedforward norms.
func ExpectedShapes(c Config) map[string][]int {
	C, F, V := c.HiddenSize, c.IntermediateSize, c.VocabSize
	hd := headDim(c)
	q, kv := c.NumAttentionHeads*hd, c.NumKeyValueHeads*hd
	f := familyOf(c.ModelType)
	m := map[string][]int{
		"model.embed_tokens.weight": {V, C},
		"model.norm.weight":         {C},
	}
	if !c.TieWordEmbeddings {
		m["lm_head.weight"] = []int{V, C}
	}
	for l := 0; l < c.NumHiddenLayers; l++ {
		p := fmt.Sprintf("model.layers.%d.", l)
		m[p+"input_layernorm.weight"] = []int{C}
		m[p+"post_attention_layernorm.weight"] = []int{C}
		m[p+"self_attn.q_proj.weight"] = []int{q, C}
		m[p+"self_attn.k_proj.weight"] = []int{kv, C}
		m[p+"self_attn.v_proj.weight"] = []int{kv, C}
		m[p+"self_attn.o_proj.weight"] = []int{C, q}
		m[p+"mlp.gate_proj.weight"] = []int{F, C}
		m[p+"mlp.up_proj.weight"] = []int{F, C}
		m[p+"mlp.down_proj.weight"] = []int{C, F}
		if c.AttentionBias {
			m[p+"self_attn.q_proj.bias"] = []int{q}
			m[p+"self_attn.k_proj.bias"] = []int{kv}
			m[p+"self_attn.v_proj.bias"] = []int{kv}
		}
		if f != nil && f.QKNorm {
			m[p+"self_attn.q_norm.weight"] = []int{hd}
			m[p+"self_attn.k_norm.weight"] = []int{hd}
		}
		if f != nil && f.Sandwich {
			m[p+"pre_feedforward_layernorm.weight"] = []int{C}
			m[p+"post_feedforward_layernorm.weight"] = []int{C}
		}
	}
	return m
}

// Check verifies that ck holds exactly the tensors its config calls for, with the right shapes
// and data lengths. A tied checkpoint may also carry lm_head.weight (some exporters write it);
// rotary_emb.inv_freq buffers of older transformers versions are tolerated.
func (ck *Checkpoint) Check() error {
	if ck.Source == "" {
		c := *ck
		c.Source = "checkpoint"
		return c.Check()
	}
	want := ExpectedShapes(ck.Config)
	names := make([]string, 0, len(want))
	for name := range want {
		names = append(names, name)
	}
	sort.Strings(names) // report the first problem in a stable order
	for _, name := range names {
		shape := want[name]
		t, ok := ck.Tensors[name]
		if !ok || t == nil {
			return fmt.Errorf("weights: %s: tensor %s is missing", ck.Source, name)
		}
		if !equalInts(t.Shape, shape) {
			return fmt.Errorf("weights: %s: tensor %s has shape %v, want %v", ck.Source, name, t.Shape, shape)
		}
		if len(t.Data) != numElements(shape) {
			return fmt.Errorf("weights: %s: tensor %s has %d values for shape %v", ck.Source, name, len(t.Data), shape)
		}
	}
	extra := make([]string, 0, len(ck.Tensors))
	for name := range ck.Tensors {
		extra = append(extra, name)
	}
	sort.Strings(extra)
	for _, name := range extra {
		t := ck.Tensors[name]
		if _, ok := want[name]; ok || strings.HasSuffix(name, "rotary_emb.inv_freq") {
			continue
		}
		if name == "lm_head.weight" && ck.Config.TieWordEmbeddings && t != nil &&
			equalInts(t.Shape, []int{ck.Config.VocabSize, ck.Config.HiddenSize}) && len(t.Data) == numElements(t.Shape) {
			continue
		}
		return fmt.Errorf("weights: %s: unexpected tensor %s (not part of a %s model with this config)", ck.Source, name, ck.Config.ModelType)
	}
	return nil
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func numElements(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// setEOS makes ids (each once, in order) c's eos ids; none is NoEOS.
func (c *Config) setEOS(ids []int) {
	c.EOSTokenIDs, c.EOSTokenID, c.NoEOS = nil, 0, len(ids) == 0
	for _, id := range ids {
		if !slices.Contains(c.EOSTokenIDs, id) {
			c.EOSTokenIDs = append(c.EOSTokenIDs, id)
		}
	}
	if len(ids) > 0 {
		c.EOSTokenID = ids[0]
	}
}

// parseEOS decodes an eos_token_id value of file name: an id, a list of ids, null or absent
// (nil raw). Ids are token ids: 0 to 2^31-1.
func parseEOS(name string, raw json.RawMessage) ([]int, error) {
	v := strings.TrimSpace(string(raw))
	if v == "" || v == "null" {
		return nil, nil
	}
	var ids []int
	if strings.HasPrefix(v, "[") {
		if err := json.Unmarshal(raw, &ids); err != nil {
			return nil, fmt.Errorf("weights: %s: eos_token_id: want an id or a list of ids: %w", name, err)
		}
	} else {
		var id int
		if err := json.Unmarshal(raw, &id); err != nil {
			return nil, fmt.Errorf("weights: %s: eos_token_id: want an id or a list of ids: %w", name, err)
		}
		ids = []int{id}
	}
	for _, id := range ids {
		if id < 0 || id > math.MaxInt32 {
			return nil, fmt.Errorf("weights: %s: eos_token_id: %d is not a token id", name, id)
		}
	}
	return ids, nil
}

// GenerationConfigFile is the file beside config.json whose eos_token_id adds stop ids.
const GenerationConfigFile = "generation_config.json"

// AddGenerationConfig adds the eos ids of a generation_config.json (b; name is used in error
// messages) that c lacks, after c's own: generation stops at every id either file declares.
// The file's other keys (sampling defaults) are not read.
func AddGenerationConfig(c *Config, name string, b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("weights: %s: %w", name, err)
	}
	ids, err := parseEOS(name, raw["eos_token_id"])
	if err != nil {
		return err
	}
	c.setEOS(append(slices.Clone(c.EOSIDs()), ids...))
	return nil
}

// readConfig reads and parses a config.json and, when present, the generation_config.json
// beside it.
func readConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("weights: %w", err)
	}
	c, err := ParseConfig(path, b)
	if err != nil {
		return Config{}, err
	}
	gpath := filepath.Join(filepath.Dir(path), GenerationConfigFile)
	b, err = os.ReadFile(gpath)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return c, nil
	case err != nil:
		return Config{}, fmt.Errorf("weights: %w", err)
	}
	if err := AddGenerationConfig(&c, gpath, b); err != nil {
		return Config{}, err
	}
	return c, nil
}
