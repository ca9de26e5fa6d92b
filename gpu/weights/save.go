package weights

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/rlhost/rlhost/gpu/safetensors"
)

// Save writes ck to dir as a Hugging Face checkpoint that transformers'
// AutoModelForCausalLM.from_pretrained loads: model.safetensors (F32) and config.json.
// A tied checkpoint is saved without lm_head.weight. config.json's eos_token_id holds every
// eos id of ck's config (a list when there are several), generation_config.json's included;
// no generation_config.json is written, so transformers stops at the same ids.
func Save(dir string, ck *Checkpoint) error {
	return SaveAs(dir, ck, safetensors.F32)
}

// SaveAs is [Save] with the tensors stored as dtype (F32, F16 or BF16).
func SaveAs(dir string, ck *Checkpoint, dtype safetensors.DType) error {
	if err := ck.Check(); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("weights: %w", err)
	}
	names := make([]string, 0, len(ck.Tensors))
	for name := range ck.Tensors {
		if strings.HasSuffix(name, "rotary_emb.inv_freq") || (name == "lm_head.weight" && ck.Config.TieWordEmbeddings) {
			continue
		}
		names = append(names, name)
	}
	sort.Strings(names)
	ts := make([]safetensors.Tensor, len(names))
	for i, name := range names {
		ts[i] = safetensors.Tensor{Name: name, Shape: ck.Tensors[name].Shape, Data: ck.Tensors[name].Data}
	}
	if err := safetensors.Write(filepath.Join(dir, safetensors.SingleFile), ts, dtype, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("weights: %w", err)
	}
	// A sharded index left from an earlier save would shadow the new file.
	os.Remove(filepath.Join(dir, safetensors.IndexFile))
	cfg, err := configJSON(ck.Config, dtype)
	if err != nil {
		return fmt.Errorf("weights: %s: %w", dir, err)
	}
	tmp := filepath.Join(dir, "config.json.tmp")
	if err := os.WriteFile(tmp, cfg, 0o644); err != nil {
		return fmt.Errorf("weights: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "config.json")); err != nil {
		return fmt.Errorf("weights: %w", err)
	}
	return nil
}

// configJSON renders c as a config.json readable by transformers 4 (top-level rope_theta,
// rope_scaling, torch_dtype) and 5 (rope_parameters, dtype). Keys whose absence would mean a
// different default in the family's config class (sliding_window) are written as null.
func configJSON(c Config, dtype safetensors.DType) ([]byte, error) {
	torchDtype := map[safetensors.DType]string{safetensors.F32: "float32", safetensors.F16: "float16", safetensors.BF16: "bfloat16"}[dtype]
	c.TorchDtype = torchDtype
	if len(c.Architectures) == 0 {
		if f := c.Family(); f != nil {
			c.Architectures = []string{f.Architecture}
		}
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["dtype"] = torchDtype
	global := map[string]any{"rope_theta": c.RopeTheta, "rope_type": "default"}
	if s := c.RopeScaling; s != nil {
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(b, &global); err != nil {
			return nil, err
		}
		global["rope_theta"] = c.RopeTheta
	}
	m["rope_parameters"] = global
	if c.ModelType == "gemma3_text" {
		// transformers 5: one set per layer type; 4: rope_scaling and rope_local_base_freq
		m["rope_parameters"] = map[string]any{
			"full_attention":    global,
			"sliding_attention": map[string]any{"rope_type": "default", "rope_theta": c.RopeLocalBaseFreq},
		}
	}
	m["mlp_bias"] = false
	// every eos id: one as an id, several as a list (generation_config.json's among them, since
	// no generation_config.json is written), none as null
	switch ids := c.EOSIDs(); len(ids) {
	case 0:
		m["eos_token_id"] = nil
	case 1:
		m["eos_token_id"] = ids[0]
	default:
		m["eos_token_id"] = ids
	}
	switch c.ModelType {
	case "qwen2", "qwen3":
		m["use_sliding_window"] = c.UseSlidingWindow
		fallthrough
	case "mistral", "gemma3_text":
		if c.SlidingWindow == 0 {
			m["sliding_window"] = nil
		}
		for _, k := range []string{"final_logit_softcapping", "attn_logit_softcapping"} {
			switch v, ok := m[k].(float64); {
			case ok:
				m[k] = floatJSON(v) // transformers 5 rejects an int here (a float field)
			case m[k] == nil && c.ModelType == "gemma3_text":
				m[k] = nil
			}
		}
	}
	return json.MarshalIndent(m, "", "  ")
}

// floatJSON is a float64 that JSON writes as a float even when it is integral (4.0, not 4):
// transformers 5 validates its config classes' float fields strictly and refuses an int.
type floatJSON float64

func (f floatJSON) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(float64(f))
	if err == nil && !bytes.ContainsAny(b, ".eE") {
		b = append(b, ".0"...)
	}
	return b, err
}
