package weights

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"

	"github.com/rlhost/rlhost/gpu/gguf"
)

// ggufNames maps the per-layer GGUF tensor suffixes (after "blk.N.") to Hugging Face names
// (after "model.layers.N.").
var ggufNames = map[string]string{
	"attn_norm.weight":   "input_layernorm.weight",
	"attn_q.weight":      "self_attn.q_proj.weight",
	"attn_q.bias":        "self_attn.q_proj.bias",
	"attn_k.weight":      "self_attn.k_proj.weight",
	"attn_k.bias":        "self_attn.k_proj.bias",
	"attn_v.weight":      "self_attn.v_proj.weight",
	"attn_v.bias":        "self_attn.v_proj.bias",
	"attn_output.weight": "self_attn.o_proj.weight",
	"ffn_norm.weight":    "post_attention_layernorm.weight",
	"ffn_gate.weight":    "mlp.gate_proj.weight",
	"ffn_up.weight":      "mlp.up_proj.weight",
	"ffn_down.weight":    "mlp.down_proj.weight",
}

// HFName maps a GGUF tensor name of a llama/qwen2 file to its Hugging Face name.
func HFName(ggufName string) (string, bool) {
	switch ggufName {
	case "token_embd.weight":
		return "model.embed_tokens.weight", true
	case "output_norm.weight":
		return "model.norm.weight", true
	case "output.weight":
		return "lm_head.weight", true
	}
	rest, ok := strings.CutPrefix(ggufName, "blk.")
	if !ok {
		return "", false
	}
	layer, suffix, ok := strings.Cut(rest, ".")
	if !ok {
		return "", false
	}
	if n, err := strconv.Atoi(layer); err != nil || n < 0 || strconv.Itoa(n) != layer {
		return "", false
	}
	hf, ok := ggufNames[suffix]
	if !ok {
		return "", false
	}
	return "model.layers." + layer + "." + hf, true
}

// LoadGGUF reads a llama- or qwen2-architecture GGUF file: the Config comes from the
// general.architecture-prefixed metadata, tensors are renamed to Hugging Face names and
// dequantised to fp32, and the embeddings are tied when output.weight is absent.
//
// llama.cpp's converter permutes the rows of Q and K of llama-architecture models for its
// adjacent-pair RoPE (GGUF row h*hd+2i+s holds HF row h*hd+s*hd/2+i, per head h, 0 <= i < hd/2,
// s in {0,1}). LoadGGUF undoes that, so the returned checkpoint always uses Hugging Face's
// rotate-half layout. Qwen2 files are not permuted.
func LoadGGUF(path string) (*Checkpoint, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("weights: %w", err)
	}
	defer f.Close()
	return FromGGUF(f)
}

// FromGGUF is [LoadGGUF] on an open (or parsed) file.
func FromGGUF(f *gguf.File) (*Checkpoint, error) {
	path := f.Name
	cfg, err := ggufConfig(f)
	if err != nil {
		return nil, err
	}
	ck := &Checkpoint{Config: cfg, Tensors: make(map[string]*Tensor, len(f.Tensors)), Source: path}
	hfNames := make([]string, len(f.Tensors))
	for i, ti := range f.Tensors {
		hf, ok := HFName(ti.Name)
		if !ok {
			return nil, fmt.Errorf("weights: %s: unexpected tensor %s (not part of a %s model this loader supports)", path, ti.Name, cfg.ModelType)
		}
		hfNames[i] = hf
	}
	hd := headDim(cfg)
	var mu sync.Mutex
	err = parallel(len(f.Tensors), func(i int) error {
		ti := &f.Tensors[i]
		data, _, err := f.Float32s(ti.Name)
		if err != nil {
			return fmt.Errorf("weights: %w", err)
		}
		t := &Tensor{Shape: ti.Shape(), Data: data}
		if cfg.ModelType == "llama" {
			var heads int
			switch {
			case strings.HasSuffix(ti.Name, ".attn_q.weight"), strings.HasSuffix(ti.Name, ".attn_q.bias"):
				heads = cfg.NumAttentionHeads
			case strings.HasSuffix(ti.Name, ".attn_k.weight"), strings.HasSuffix(ti.Name, ".attn_k.bias"):
				heads = cfg.NumKeyValueHeads
			}
			if heads > 0 {
				if len(t.Shape) == 0 || t.Shape[0] != heads*hd {
					return fmt.Errorf("weights: %s: tensor %s has shape %v, want %d rows (%d heads x %d)", path, ti.Name, t.Shape, heads*hd, heads, hd)
				}
				t.Data = UnpermuteRows(t.Data, heads, hd)
			}
		}
		mu.Lock()
		ck.Tensors[hfNames[i]] = t
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	if err := ck.Check(); err != nil {
		return nil, err
	}
	return ck, nil
}

// UnpermuteRows undoes llama.cpp's Q/K row permutation: w holds heads*hd rows; in the result,
// row h*hd + s*hd/2 + i is row h*hd + 2i + s of w. It returns a new slice.
func UnpermuteRows(w []float32, heads, hd int) []float32 {
	rows := heads * hd
	cols := len(w) / rows
	out := make([]float32, len(w))
	for h := 0; h < heads; h++ {
		for i := 0; i < hd/2; i++ {
			for s := 0; s < 2; s++ {
				src := (h*hd + 2*i + s) * cols
				dst := (h*hd + s*hd/2 + i) * cols
				copy(out[dst:dst+cols], w[src:src+cols])
			}
		}
	}
	return out
}

// PermuteRows applies llama.cpp's Q/K row permutation (the inverse of [UnpermuteRows]).
func PermuteRows(w []float32, heads, hd int) []float32 {
	rows := heads * hd
	cols := len(w) / rows
	out := make([]float32, len(w))
	for h := 0; h < heads; h++ {
		for i := 0; i < hd/2; i++ {
			for s := 0; s < 2; s++ {
				dst := (h*hd + 2*i + s) * cols
				src := (h*hd + s*hd/2 + i) * cols
				copy(out[dst:dst+cols], w[src:src+cols])
			}
		}
	}
	return out
}

// ggufConfig derives a Hugging Face Config from GGUF metadata.
func ggufConfig(f *gguf.File) (Config, error) {
	var c Config
	arch, err := f.String("general.architecture")
	if err != nil {
		return c, fmt.Errorf("weights: %w", err)
	}
	switch arch {
	case "llama":
		c.Architectures = []string{"LlamaForCausalLM"}
	case "qwen2":
		c.Architectures = []string{"Qwen2ForCausalLM"}
	default:
		return c, fmt.Errorf("weights: %s: unsupported architecture %q (general.architecture); want llama or qwen2", f.Name, arch)
	}
	c.ModelType = arch
	var firstErr error
	intKey := func(key string, def int, required bool) int {
		full := arch + "." + key
		if !f.Has(full) {
			if required && firstErr == nil {
				firstErr = fmt.Errorf("weights: %s: missing metadata key %s", f.Name, full)
			}
			return def
		}
		v, err := f.Uint(full)
		if err != nil {
			// Some files give per-layer arrays; accept them when all entries agree.
			if ints, aerr := f.Ints(full); aerr == nil && len(ints) > 0 {
				for _, x := range ints {
					if x != ints[0] && firstErr == nil {
						firstErr = fmt.Errorf("weights: %s: metadata key %s varies per layer (%v), which is not supported", f.Name, full, ints)
					}
				}
				v, err = uint64(ints[0]), nil
			}
		}
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("weights: %w", err)
		}
		if v > 1<<31 && firstErr == nil {
			firstErr = fmt.Errorf("weights: %s: metadata key %s = %d is out of range", f.Name, full, v)
		}
		return int(v)
	}
	floatKey := func(key string, def float64, required bool) float64 {
		full := arch + "." + key
		if !f.Has(full) {
			if required && firstErr == nil {
				firstErr = fmt.Errorf("weights: %s: missing metadata key %s", f.Name, full)
			}
			return def
		}
		v, err := f.Float(full)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("weights: %w", err)
		}
		if val, _ := f.Value(full); val.Type == gguf.TypeFloat32 {
			// Print as the shortest float32 decimal, so 1e-5 stays 1e-5 in config.json.
			v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', -1, 32), 64)
		}
		return v
	}
	c.NumHiddenLayers = intKey("block_count", 0, true)
	c.HiddenSize = intKey("embedding_length", 0, true)
	c.IntermediateSize = intKey("feed_forward_length", 0, true)
	c.NumAttentionHeads = intKey("attention.head_count", 0, true)
	c.NumKeyValueHeads = intKey("attention.head_count_kv", c.NumAttentionHeads, false)
	c.MaxPositionEmbeddings = intKey("context_length", 0, false)
	c.RopeTheta = floatKey("rope.freq_base", 10000, false)
	c.RMSNormEps = floatKey("attention.layer_norm_rms_epsilon", 0, true)
	keyLen := intKey("attention.key_length", 0, false)
	valLen := intKey("attention.value_length", 0, false)
	ropeDim := intKey("rope.dimension_count", 0, false)
	vocab := intKey("vocab_size", 0, false)
	if firstErr != nil {
		return c, firstErr
	}
	if c.NumAttentionHeads == 0 {
		return c, fmt.Errorf("weights: %s: %s.attention.head_count is 0", f.Name, arch)
	}
	hd := 0
	if c.HiddenSize%c.NumAttentionHeads == 0 {
		hd = c.HiddenSize / c.NumAttentionHeads
	}
	if keyLen != 0 {
		hd = keyLen
	}
	c.HeadDim = hd
	if valLen != 0 && valLen != hd {
		return c, fmt.Errorf("weights: %s: %s.attention.value_length %d differs from the key length %d, which is not supported", f.Name, arch, valLen, hd)
	}
	if ropeDim != 0 && ropeDim != hd {
		return c, fmt.Errorf("weights: %s: %s.rope.dimension_count %d differs from the head dimension %d (partial RoPE is not supported)", f.Name, arch, ropeDim, hd)
	}
	if st, err := f.String(arch + ".rope.scaling.type"); err == nil && st != "none" {
		return c, fmt.Errorf("weights: %s: %s.rope.scaling.type = %q is not supported (only plain RoPE)", f.Name, arch, st)
	}
	if _, ok := f.Tensor("rope_freqs.weight"); ok {
		return c, fmt.Errorf("weights: %s: tensor rope_freqs.weight (scaled RoPE) is not supported", f.Name)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return c, fmt.Errorf("weights: %s: tensor token_embd.weight is missing", f.Name)
	}
	if vocab == 0 {
		if s := emb.Shape(); len(s) == 2 {
			vocab = s[0]
		}
	}
	c.VocabSize = vocab
	_, hasOutput := f.Tensor("output.weight")
	c.TieWordEmbeddings = !hasOutput
	_, c.AttentionBias = f.Tensor("blk.0.attn_q.bias")
	if arch == "qwen2" {
		c.AttentionBias = true
	}
	c.HiddenAct = "silu"
	c.TorchDtype = "float32"
	if id, err := f.Uint("tokenizer.ggml.bos_token_id"); err == nil && id <= math.MaxInt32 {
		c.BOSTokenID = int(id)
	}
	if id, err := f.Uint("tokenizer.ggml.eos_token_id"); err == nil && id <= math.MaxInt32 {
		c.setEOS([]int{int(id)})
	} else {
		c.setEOS(nil)
	}
	if err := checkConfig(c); err != nil {
		return c, fmt.Errorf("weights: %s: %w", f.Name, err)
	}
	return c, nil
}
