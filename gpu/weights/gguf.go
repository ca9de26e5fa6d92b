package weights

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/rlhost/rlhost/gpu/gguf"
)

// ggufArch is what the loader knows of a llama.cpp architecture (general.architecture).
type ggufArch struct {
	family string // the Hugging Face model_type
	// names maps per-layer GGUF tensor suffixes (after "blk.N.") to Hugging Face names (after
	// "model.layers.N.").
	names map[string]string
	// permuteQK: llama.cpp's converter permuted the rows of Q and K for its adjacent-pair RoPE.
	permuteQK bool
	// normShift was added to every norm weight by llama.cpp's converter (Gemma stores w for
	// RMSNorm's (1 + w); llama.cpp's files hold 1 + w).
	normShift float32
}

var (
	llamaNames = map[string]string{
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
	qwen3Names = with(llamaNames, map[string]string{
		"attn_q_norm.weight": "self_attn.q_norm.weight",
		"attn_k_norm.weight": "self_attn.k_norm.weight",
	})
	// gemma3: ffn_norm is the pre-feedforward norm; post_attention_norm and post_ffw_norm
	// normalise the attention's and the MLP's outputs.
	gemma3Names = with(qwen3Names, map[string]string{
		"post_attention_norm.weight": "post_attention_layernorm.weight",
		"ffn_norm.weight":            "pre_feedforward_layernorm.weight",
		"post_ffw_norm.weight":       "post_feedforward_layernorm.weight",
	})

	ggufArchs = map[string]ggufArch{
		"llama":  {family: "llama", names: llamaNames, permuteQK: true},
		"qwen2":  {family: "qwen2", names: llamaNames},
		"qwen3":  {family: "qwen3", names: qwen3Names},
		"gemma3": {family: "gemma3_text", names: gemma3Names, normShift: 1},
	}
)

// with is base plus extra (extra wins).
func with(base, extra map[string]string) map[string]string {
	m := maps.Clone(base)
	maps.Copy(m, extra)
	return m
}

// ggufArchNames lists the architectures LoadGGUF reads, for error messages.
func ggufArchNames() string {
	names := slices.Sorted(maps.Keys(ggufArchs))
	return strings.Join(names, ", ")
}

// HFName maps a GGUF tensor name of a llama/qwen2 file to its Hugging Face name.
func HFName(ggufName string) (string, bool) {
	return hfName(ggufArchs["llama"], ggufName)
}

// HFNameArch maps a GGUF tensor name of a file of llama.cpp architecture arch
// (general.architecture: llama, qwen2, qwen3 or gemma3) to its Hugging Face name.
func HFNameArch(arch, ggufName string) (string, bool) {
	a, ok := ggufArchs[arch]
	if !ok {
		return "", false
	}
	return hfName(a, ggufName)
}

func hfName(a ggufArch, ggufName string) (string, bool) {
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
	hf, ok := a.names[suffix]
	if !ok {
		return "", false
	}
	return "model.layers." + layer + "." + hf, true
}

// LoadGGUF reads a GGUF file of llama.cpp architecture llama (Llama 2 and 3.x, Mistral),
// qwen2, qwen3 or gemma3: the Config comes from the general.architecture-prefixed metadata
// (what transformers writes for the same model; see docs/model-files.md), tensors are renamed
// to Hugging Face names and dequantised to fp32, and the embeddings are tied when output.weight
// is absent.
//
// llama.cpp's converter permutes the rows of Q and K of llama-architecture models for its
// adjacent-pair RoPE (GGUF row h*hd+2i+s holds HF row h*hd+s*hd/2+i, per head h, 0 <= i < hd/2,
// s in {0,1}). LoadGGUF undoes that, so the returned checkpoint always uses Hugging Face's
// rotate-half layout. Qwen2, Qwen3 and Gemma 3 files are not permuted. Gemma 3's norm weights
// are stored with 1 added (llama.cpp's RMSNorm multiplies by the weight itself): LoadGGUF
// subtracts it again. Llama 3.x's rope_freqs.weight becomes the config's rope_scaling.
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
	cfg, arch, err := ggufConfig(f)
	if err != nil {
		return nil, err
	}
	ck := &Checkpoint{Config: cfg, Tensors: make(map[string]*Tensor, len(f.Tensors)), Source: path}
	hfNames := make([]string, len(f.Tensors))
	for i, ti := range f.Tensors {
		if ti.Name == ropeFreqsTensor && cfg.RopeScaling != nil {
			continue // read into the config by ggufConfig
		}
		hf, ok := hfName(arch, ti.Name)
		if !ok {
			return nil, fmt.Errorf("weights: %s: unexpected tensor %s (not part of a %s model this loader supports)", path, ti.Name, cfg.ModelType)
		}
		hfNames[i] = hf
	}
	hd := headDim(cfg)
	var mu sync.Mutex
	err = parallel(len(f.Tensors), func(i int) error {
		ti := &f.Tensors[i]
		if hfNames[i] == "" {
			return nil
		}
		data, _, err := f.Float32s(ti.Name)
		if err != nil {
			return fmt.Errorf("weights: %w", err)
		}
		t := &Tensor{Shape: ti.Shape(), Data: data}
		if arch.permuteQK {
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
		if arch.normShift != 0 && strings.HasSuffix(hfNames[i], "norm.weight") {
			for j := range t.Data {
				t.Data[j] -= arch.normShift
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

// ropeFreqsTensor is where llama.cpp's converter puts Llama 3's RoPE frequency factors.
const ropeFreqsTensor = "rope_freqs.weight"

// ggufConfig derives a Hugging Face Config from GGUF metadata: the config transformers writes
// for the same model, as far as the file tells (docs/model-files.md).
func ggufConfig(f *gguf.File) (Config, ggufArch, error) {
	var c Config
	name, err := f.String("general.architecture")
	if err != nil {
		return c, ggufArch{}, fmt.Errorf("weights: %w", err)
	}
	arch, ok := ggufArchs[name]
	if !ok {
		return c, arch, fmt.Errorf("weights: %s: unsupported architecture %q (general.architecture); want %s", f.Name, name, ggufArchNames())
	}
	c.ModelType = arch.family
	c.Architectures = []string{familyOf(arch.family).Architecture}
	var firstErr error
	intKey := func(key string, def int, required bool) int {
		full := name + "." + key
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
		full := name + "." + key
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
		if (math.IsNaN(v) || math.IsInf(v, 0)) && firstErr == nil {
			firstErr = fmt.Errorf("weights: %s: metadata key %s = %v", f.Name, full, v)
		}
		return v
	}
	c.NumHiddenLayers = intKey("block_count", 0, true)
	c.HiddenSize = intKey("embedding_length", 0, true)
	c.IntermediateSize = intKey("feed_forward_length", 0, true)
	c.NumAttentionHeads = intKey("attention.head_count", 0, true)
	c.NumKeyValueHeads = intKey("attention.head_count_kv", c.NumAttentionHeads, false)
	c.MaxPositionEmbeddings = intKey("context_length", 0, false)
	c.RopeTheta = floatKey("rope.freq_base", 10000, false) // llama.cpp's default
	c.RMSNormEps = floatKey("attention.layer_norm_rms_epsilon", 0, true)
	keyLen := intKey("attention.key_length", 0, false)
	valLen := intKey("attention.value_length", 0, false)
	ropeDim := intKey("rope.dimension_count", 0, false)
	vocab := intKey("vocab_size", 0, false)
	window := intKey("attention.sliding_window", 0, false)
	localBase := floatKey("rope.freq_base_swa", 10000, false) // llama.cpp's default
	finalCap := floatKey("final_logit_softcapping", 0, false)
	attnCap := floatKey("attn_logit_softcapping", 0, false)
	if firstErr != nil {
		return c, arch, firstErr
	}
	if c.NumAttentionHeads == 0 {
		return c, arch, fmt.Errorf("weights: %s: %s.attention.head_count is 0", f.Name, name)
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
		return c, arch, fmt.Errorf("weights: %s: %s.attention.value_length %d differs from the key length %d, which is not supported", f.Name, name, valLen, hd)
	}
	if ropeDim != 0 && ropeDim != hd {
		return c, arch, fmt.Errorf("weights: %s: %s.rope.dimension_count %d differs from the head dimension %d (partial RoPE is not supported)", f.Name, name, ropeDim, hd)
	}
	if err := ggufRopeScaling(f, name, &c); err != nil {
		return c, arch, err
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok {
		return c, arch, fmt.Errorf("weights: %s: tensor token_embd.weight is missing", f.Name)
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
	if name == "qwen2" {
		c.AttentionBias = true
	}
	c.HiddenAct = familyOf(arch.family).Activation
	c.TorchDtype = "float32"
	switch name {
	case "gemma3":
		c.HiddenActivation = c.HiddenAct
		c.RopeLocalBaseFreq = localBase
		c.FinalLogitSoftcapping = finalCap
		if attnCap != 0 {
			return c, arch, fmt.Errorf("weights: %s: gemma3.attn_logit_softcapping = %v is not supported (llama.cpp's gemma3 ignores it; Gemma 3 has none)", f.Name, attnCap)
		}
		// llama.cpp scales Gemma 3's scores by 1/sqrt(key_length), but 27B's (62 layers)
		// by 1/sqrt(hidden/heads): transformers' query_pre_attn_scalar.
		c.QueryPreAttnScalar = float64(hd)
		if c.NumHiddenLayers == 62 {
			c.QueryPreAttnScalar = float64(c.HiddenSize / c.NumAttentionHeads)
		}
		if c.LayerTypes, err = ggufLayerTypes(f, name, c.NumHiddenLayers, window); err != nil {
			return c, arch, err
		}
		if window > 0 {
			c.SlidingWindow = window
		}
	default:
		if window > 0 {
			// llama.cpp's llama, qwen2 and qwen3 graphs attend to every position whatever the file says
			return c, arch, fmt.Errorf("weights: %s: %s.attention.sliding_window = %d: llama.cpp's %s has no sliding window, so what the file means is unclear", f.Name, name, window, name)
		}
	}
	if id, err := f.Uint("tokenizer.ggml.bos_token_id"); err == nil && id <= math.MaxInt32 {
		c.BOSTokenID = int(id)
	}
	if id, err := f.Uint("tokenizer.ggml.eos_token_id"); err == nil && id <= math.MaxInt32 {
		c.setEOS([]int{int(id)})
	} else {
		c.setEOS(nil)
	}
	if name == "gemma3" {
		// Gemma's turns end with <end_of_turn>: llama.cpp ends generation there (an
		// end-of-generation token by its text) and Gemma 3's generation_config.json lists it
		// beside <eos>; the GGUF's metadata names only <eos>
		if toks, err := f.Strings("tokenizer.ggml.tokens"); err == nil {
			if id := slices.Index(toks, "<end_of_turn>"); id >= 0 && len(c.EOSIDs()) > 0 {
				c.setEOS(append(slices.Clone(c.EOSIDs()), id))
			}
		}
	}
	canonicalWindows(&c)
	if err := checkConfig(c); err != nil {
		return c, arch, fmt.Errorf("weights: %s: %w", f.Name, err)
	}
	return c, arch, nil
}

// ggufLayerTypes is gemma3's layer_types as llama.cpp derives them: without a sliding window
// every layer is global; with one, <arch>.attention.sliding_window_pattern is either a bool
// per layer (true: sliding) or a period n (default 6) whose every nth layer is global
// (llama_hparams::set_swa_pattern: layer il slides when il % n < n-1).
func ggufLayerTypes(f *gguf.File, arch string, layers, window int) ([]string, error) {
	if layers <= 0 || layers > maxLayers {
		return nil, fmt.Errorf("weights: %s: %s.block_count = %d is out of range (1 to %d)", f.Name, arch, layers, maxLayers)
	}
	types := make([]string, layers)
	for i := range types {
		types[i] = "full_attention"
	}
	if window <= 0 {
		return types, nil
	}
	key := arch + ".attention.sliding_window_pattern"
	n := 6
	if f.Has(key) {
		if a, err := f.Array(key); err == nil {
			if a.Len() != layers {
				return nil, fmt.Errorf("weights: %s: %s has %d entries for %d layers", f.Name, key, a.Len(), layers)
			}
			for i := range types {
				b, err := a.Index(i).Bool()
				if err != nil {
					return nil, fmt.Errorf("weights: %s: %s[%d]: %w", f.Name, key, i, err)
				}
				if b {
					types[i] = "sliding_attention"
				}
			}
			return types, nil
		}
		v, err := f.Uint(key)
		if err != nil {
			return nil, fmt.Errorf("weights: %w", err)
		}
		if v > 1<<20 {
			return nil, fmt.Errorf("weights: %s: %s = %d is out of range", f.Name, key, v)
		}
		n = int(v)
	}
	for i := range types {
		if n == 0 || i%n < n-1 {
			types[i] = "sliding_attention"
		}
	}
	return types, nil
}

// Llama 3's RoPE scaling as llama.cpp's converter writes it: no metadata, only the tensor
// rope_freqs.weight of head_dim/2 factors by which llama.cpp divides each frequency. They
// depend on factor, low_freq_factor, high_freq_factor and original_max_position_embeddings,
// which are matched against the values Llama 3.1 (and 3.3) and Llama 3.2 ship with.
var llama3Scalings = []RopeScaling{
	{Type: "llama3", Factor: 8, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192},  // Llama 3.1, 3.3
	{Type: "llama3", Factor: 32, LowFreqFactor: 1, HighFreqFactor: 4, OriginalMaxPositionEmbeddings: 8192}, // Llama 3.2
}

// Llama3RopeFactors are the rope_freqs.weight llama.cpp's converter (LlamaModel.
// generate_extra_tensors) writes for llama3 scaling s of RoPE base theta over head_dim dim:
// 1 for wavelengths below original/high_freq_factor, factor above original/low_freq_factor,
// and in between 1/((1-smooth)/factor + smooth), smooth = (original/wavelength - low) /
// (high - low).
func Llama3RopeFactors(s RopeScaling, theta float64, dim int) []float32 {
	out := make([]float32, dim/2)
	lowWave := float64(s.OriginalMaxPositionEmbeddings) / s.LowFreqFactor
	highWave := float64(s.OriginalMaxPositionEmbeddings) / s.HighFreqFactor
	for i := range out {
		freq := float64(float32(1 / math.Pow(theta, float64(2*i)/float64(dim))))
		wave := 2 * math.Pi / freq
		switch {
		case wave < highWave:
			out[i] = 1
		case wave > lowWave:
			out[i] = float32(s.Factor)
		default:
			smooth := (float64(s.OriginalMaxPositionEmbeddings)/wave - s.LowFreqFactor) / (s.HighFreqFactor - s.LowFreqFactor)
			out[i] = float32(1 / ((1-smooth)/s.Factor + smooth))
		}
	}
	return out
}

// ggufRopeScaling reads the RoPE scaling of a file into c: <arch>.rope.scaling.type linear
// (factor) or yarn (factor, original context length, beta_fast/beta_slow), or Llama 3's
// rope_freqs.weight (see llama3Scalings). Anything else is refused by name.
func ggufRopeScaling(f *gguf.File, arch string, c *Config) error {
	key := func(k string) string { return arch + ".rope.scaling." + k }
	typ := "none"
	if f.Has(key("type")) {
		var err error
		if typ, err = f.String(key("type")); err != nil {
			return fmt.Errorf("weights: %w", err)
		}
	}
	num := func(k string) (float64, error) {
		if !f.Has(key(k)) {
			return 0, nil
		}
		v, err := f.Float(key(k))
		if err != nil {
			return 0, fmt.Errorf("weights: %w", err)
		}
		if val, _ := f.Value(key(k)); val.Type == gguf.TypeFloat32 {
			v, _ = strconv.ParseFloat(strconv.FormatFloat(v, 'g', -1, 32), 64)
		}
		return v, nil
	}
	factor, err := num("factor")
	if err != nil {
		return err
	}
	if _, ok := f.Tensor(ropeFreqsTensor); ok {
		if typ != "none" || arch != "llama" {
			return fmt.Errorf("weights: %s: tensor %s with %s = %q: only Llama 3's llama3 scaling is read from it", f.Name, ropeFreqsTensor, key("type"), typ)
		}
		return llama3FromTensor(f, c)
	}
	switch typ {
	case "none":
		return nil
	case "linear":
		if factor <= 0 {
			return fmt.Errorf("weights: %s: %s = linear needs %s > 0", f.Name, key("type"), key("factor"))
		}
		c.RopeScaling = &RopeScaling{Type: "linear", Factor: factor}
		return nil
	case "yarn":
		// transformers' yarn takes its attention factor from factor (0.1 ln(factor) + 1) as
		// llama.cpp does when the file sets none; a file that sets one (or the other yarn
		// knobs) means what llama.cpp's implementation makes of it, refused rather than guessed.
		for _, k := range []string{"yarn_attn_factor", "yarn_ext_factor", "yarn_log_multiplier"} {
			if f.Has(key(k)) {
				return fmt.Errorf("weights: %s: %s is not supported (yarn scaling with llama.cpp's own attention/extrapolation factors)", f.Name, key(k))
			}
		}
		orig := 0
		if f.Has(key("original_context_length")) {
			v, err := f.Uint(key("original_context_length"))
			if err != nil {
				return fmt.Errorf("weights: %w", err)
			}
			if v > 1<<31 {
				return fmt.Errorf("weights: %s: %s = %d is out of range", f.Name, key("original_context_length"), v)
			}
			orig = int(v)
		}
		if factor <= 0 || orig <= 0 {
			return fmt.Errorf("weights: %s: %s = yarn needs %s > 0 and %s > 0", f.Name, key("type"), key("factor"), key("original_context_length"))
		}
		s := &RopeScaling{Type: "yarn", Factor: factor, OriginalMaxPositionEmbeddings: orig}
		if s.BetaFast, err = num("yarn_beta_fast"); err != nil {
			return err
		}
		if s.BetaSlow, err = num("yarn_beta_slow"); err != nil {
			return err
		}
		c.RopeScaling = s
		return nil
	}
	return fmt.Errorf("weights: %s: %s = %q is not supported (supported: none, linear, yarn; llama3 through %s)", f.Name, key("type"), typ, ropeFreqsTensor)
}

// llama3FromTensor matches rope_freqs.weight against llama3Scalings.
func llama3FromTensor(f *gguf.File, c *Config) error {
	got, ti, err := f.Float32s(ropeFreqsTensor)
	if err != nil {
		return fmt.Errorf("weights: %w", err)
	}
	hd := headDim(*c)
	if len(ti.Shape()) != 1 || len(got) != hd/2 {
		return fmt.Errorf("weights: %s: tensor %s has shape %v, want [%d] (head_dim/2)", f.Name, ropeFreqsTensor, ti.Shape(), hd/2)
	}
	var tried []string
	for _, s := range llama3Scalings {
		want := Llama3RopeFactors(s, c.RopeTheta, hd)
		ok := true
		for i := range want {
			if math.Abs(float64(got[i]-want[i])) > 1e-5*float64(want[i]) {
				ok = false
				break
			}
		}
		if ok {
			s := s
			c.RopeScaling = &s
			return nil
		}
		tried = append(tried, fmt.Sprintf("factor %v, low_freq_factor %v, high_freq_factor %v, original_max_position_embeddings %d",
			s.Factor, s.LowFreqFactor, s.HighFreqFactor, s.OriginalMaxPositionEmbeddings))
	}
	return fmt.Errorf("weights: %s: tensor %s %v is not llama3 RoPE scaling with Llama 3.1's or 3.2's parameters (%s) at rope.freq_base %v; other scalings are not supported",
		f.Name, ropeFreqsTensor, clip(got, 8), strings.Join(tried, "; "), c.RopeTheta)
}

// clip is at most n values of v, for error messages.
func clip(v []float32, n int) []float32 {
	if len(v) > n {
		return v[:n]
	}
	return v
}
