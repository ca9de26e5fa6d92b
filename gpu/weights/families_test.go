package weights

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/gguf"
)

// TestFamiliesGGUF: tiny random Qwen3, Gemma 3 (gemma3_text), Llama 3.x (llama3 RoPE scaling),
// Qwen3 with yarn scaling and Mistral checkpoints that transformers saved, converted to GGUF by
// llama.cpp's own convert_hf_to_gguf.py (scripts/goldens/weights/families_golden.py), load to
// the safetensors checkpoint's tensors and config. Tensors are equal bit for bit, but Gemma's
// norms: llama.cpp's converter stored 1 + w in float32, so w comes back within half an ulp of
// 1 + w. Mistral's file is a llama one: llama.cpp has no sliding window for it, and the
// converter writes neither the window nor that it came from Mistral, so it loads as the Llama
// that llama.cpp computes (model_type llama, no window); everything else agrees.
func TestFamiliesGGUF(t *testing.T) {
	for _, name := range []string{"qwen3", "gemma3", "llama3", "qwen3-yarn", "mistral"} {
		t.Run(name, func(t *testing.T) {
			hf := mustLoad(t, filepath.Join("testdata", name))
			gg := mustLoad(t, filepath.Join("testdata", name+".gguf"))
			want := hf.Config
			if name == "mistral" {
				if want.ModelType != "mistral" || want.SlidingWindow != 16 {
					t.Fatalf("safetensors config: model_type %q sliding_window %d", want.ModelType, want.SlidingWindow)
				}
				want.ModelType, want.Architectures, want.SlidingWindow = "llama", []string{"LlamaForCausalLM"}, 0
			}
			if !reflect.DeepEqual(gg.Config, want) {
				t.Errorf("config from GGUF\n%+v\nwant\n%+v", gg.Config, want)
			}
			if !reflect.DeepEqual(sortedNames(gg), sortedNames(hf)) {
				t.Fatalf("tensors %v\nwant %v", sortedNames(gg), sortedNames(hf))
			}
			for n, w := range hf.Tensors {
				g := gg.Tensors[n]
				if !reflect.DeepEqual(g.Shape, w.Shape) {
					t.Errorf("%s: shape %v, want %v", n, g.Shape, w.Shape)
					continue
				}
				shifted := name == "gemma3" && strings.HasSuffix(n, "norm.weight")
				for i := range w.Data {
					tol := 0.0
					if shifted { // half an ulp of 1 + w
						tol = math.Abs(1+float64(w.Data[i])) * math.Pow(2, -24)
					}
					if d := math.Abs(float64(g.Data[i] - w.Data[i])); d > tol {
						t.Errorf("%s[%d] = %v, want %v (tolerance %g)", n, i, g.Data[i], w.Data[i], tol)
						break
					}
				}
			}
		})
	}
}

// TestGemma3Config: what the tiny Gemma 3 GGUF's metadata becomes, spelled out.
func TestGemma3Config(t *testing.T) {
	c := mustLoad(t, "testdata/gemma3.gguf").Config
	s := "sliding_attention"
	if c.ModelType != "gemma3_text" || c.Architectures[0] != "Gemma3ForCausalLM" || c.HeadDim != 16 ||
		c.QueryPreAttnScalar != 16 || c.SlidingWindow != 16 || c.RopeTheta != 1e6 || c.RopeLocalBaseFreq != 1e4 ||
		c.Activation() != "gelu_pytorch_tanh" || !c.TieWordEmbeddings || c.FinalLogitSoftcapping != 0 ||
		!reflect.DeepEqual(c.LayerTypes, []string{s, s, s, s, s, "full_attention"}) {
		t.Errorf("config %+v", c)
	}
}

// TestLlama3RopeFactors: the factors of Llama 3.1's and 3.2's scalings are told apart and each
// becomes its rope_scaling; a tensor matching neither is refused naming it and both.
func TestLlama3RopeFactors(t *testing.T) {
	base := mustLoad(t, "testdata/llama3.gguf").Config
	if s := base.RopeScaling; s == nil || *s != llama3Scalings[1] {
		t.Fatalf("llama3.gguf: rope_scaling %+v, want Llama 3.2's %+v", s, llama3Scalings[1])
	}
	b, err := os.ReadFile("testdata/llama3.gguf")
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("llama3.gguf", b)
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := f.Tensor(ropeFreqsTensor)
	if !ok || ti.Type != gguf.F32 {
		t.Fatalf("llama3.gguf: %s missing or not F32", ropeFreqsTensor)
	}
	off := int(f.DataOffset + ti.Offset)
	write := func(v []float32) string {
		c := append([]byte(nil), b...)
		for i, x := range v {
			binaryPutFloat32(c[off+4*i:], x)
		}
		p := filepath.Join(t.TempDir(), "llama3.gguf")
		if err := os.WriteFile(p, c, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Llama 3.1's factors at the same base and head_dim
	ck := mustLoad(t, write(Llama3RopeFactors(llama3Scalings[0], base.RopeTheta, 16)))
	if s := ck.Config.RopeScaling; s == nil || *s != llama3Scalings[0] {
		t.Errorf("Llama 3.1's factors: rope_scaling %+v, want %+v", s, llama3Scalings[0])
	}
	if _, ok := ck.Tensors["rope_freqs.weight"]; ok || len(ck.Tensors) != len(mustLoad(t, "testdata/llama3").Tensors) {
		t.Errorf("rope_freqs.weight kept as a tensor")
	}
	// factor 16: neither
	other := llama3Scalings[0]
	other.Factor = 16
	_, err = Load(write(Llama3RopeFactors(other, base.RopeTheta, 16)))
	if err == nil || !strings.Contains(err.Error(), "rope_freqs.weight") || !strings.Contains(err.Error(), "factor 8") ||
		!strings.Contains(err.Error(), "factor 32") || !strings.Contains(err.Error(), "llama3.gguf") {
		t.Errorf("factor 16: err = %v, want an error naming the tensor, the file and both candidates", err)
	}
	// the converter's own factors (llama3.gguf) equal Llama3RopeFactors's to float32 rounding
	got, _, _ := f.Float32s(ropeFreqsTensor)
	want := Llama3RopeFactors(llama3Scalings[1], base.RopeTheta, 16)
	bands := map[string]bool{}
	for i := range got {
		if math.Abs(float64(got[i]-want[i])) > 1e-6*float64(want[i]) {
			t.Errorf("rope_freqs[%d] = %v, Llama3RopeFactors %v", i, got[i], want[i])
		}
		switch {
		case want[i] == 1:
			bands["high"] = true
		case want[i] == 32:
			bands["low"] = true
		default:
			bands["smooth"] = true
		}
	}
	if len(bands) != 3 {
		t.Errorf("the tiny model's frequencies cover bands %v, want all three", bands)
	}
}

func binaryPutFloat32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

// gemma3Path is where `make model-gemma3` puts Gemma 3 270M.
const gemma3Path = "../../models/gemma-3-270m-q4_k_m.gguf"

// TestGemma3GGUF270M loads the real Gemma 3 270M GGUF (Q5_0, Q8_0, Q4_K, Q6_K and F32 tensors)
// and compares it with transformers loading the same file (gemma3-270m.json, written by
// scripts/goldens/weights/gemma3_270m_golden.py): the config transformers builds, and every
// tensor's sums and first values to 1e-6.
func TestGemma3GGUF270M(t *testing.T) {
	if _, err := os.Stat(gemma3Path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: run `make model-gemma3` (CI is set, so this fails)", gemma3Path)
		}
		t.Skipf("%s is missing: run `make model-gemma3`", gemma3Path)
	}
	ck := mustLoad(t, gemma3Path)
	b, err := os.ReadFile("testdata/gemma3-270m.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Config struct {
			ModelType             string   `json:"model_type"`
			HiddenSize            int      `json:"hidden_size"`
			IntermediateSize      int      `json:"intermediate_size"`
			NumHiddenLayers       int      `json:"num_hidden_layers"`
			NumAttentionHeads     int      `json:"num_attention_heads"`
			NumKeyValueHeads      int      `json:"num_key_value_heads"`
			HeadDim               int      `json:"head_dim"`
			VocabSize             int      `json:"vocab_size"`
			MaxPositionEmbeddings int      `json:"max_position_embeddings"`
			RMSNormEps            float64  `json:"rms_norm_eps"`
			TieWordEmbeddings     bool     `json:"tie_word_embeddings"`
			SlidingWindow         int      `json:"sliding_window"`
			LayerTypes            []string `json:"layer_types"`
			QueryPreAttnScalar    float64  `json:"query_pre_attn_scalar"`
			FinalLogitSoftcapping *float64 `json:"final_logit_softcapping"`
			HiddenActivation      string   `json:"hidden_activation"`
			BOSTokenID            int      `json:"bos_token_id"`
			EOSTokenID            int      `json:"eos_token_id"`
			RopeParameters        map[string]struct {
				RopeType  string  `json:"rope_type"`
				RopeTheta float64 `json:"rope_theta"`
			} `json:"rope_parameters"`
		} `json:"config"`
		Tensors map[string]figures `json:"tensors"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	c, r := ck.Config, ref.Config
	if c.ModelType != r.ModelType || c.HiddenSize != r.HiddenSize || c.IntermediateSize != r.IntermediateSize ||
		c.NumHiddenLayers != r.NumHiddenLayers || c.NumAttentionHeads != r.NumAttentionHeads ||
		c.NumKeyValueHeads != r.NumKeyValueHeads || c.HeadDim != r.HeadDim || c.VocabSize != r.VocabSize ||
		c.MaxPositionEmbeddings != r.MaxPositionEmbeddings || float32(c.RMSNormEps) != float32(r.RMSNormEps) ||
		c.TieWordEmbeddings != r.TieWordEmbeddings || c.SlidingWindow != r.SlidingWindow ||
		!reflect.DeepEqual(c.LayerTypes, r.LayerTypes) || c.QueryPreAttnScalar != r.QueryPreAttnScalar ||
		r.FinalLogitSoftcapping != nil || c.FinalLogitSoftcapping != 0 || c.Activation() != r.HiddenActivation ||
		c.BOSTokenID != r.BOSTokenID || !reflect.DeepEqual(c.EOSIDs(), []int{r.EOSTokenID, 106}) ||
		c.RopeTheta != r.RopeParameters["full_attention"].RopeTheta ||
		c.RopeLocalBaseFreq != r.RopeParameters["sliding_attention"].RopeTheta || c.RopeScaling != nil {
		t.Errorf("config\n%+v\ntransformers\n%+v", c, r)
	}
	// (transformers' GGUF loader reads <eos> alone; generation also ends at <end_of_turn>, 106,
	// as llama.cpp and Gemma 3's generation_config.json have it)
	// google/gemma-3-270m's config.json, spelled out
	if c.HiddenSize != 640 || c.NumHiddenLayers != 18 || c.HeadDim != 256 || c.SlidingWindow != 512 ||
		c.QueryPreAttnScalar != 256 || c.RopeTheta != 1e6 || c.RopeLocalBaseFreq != 1e4 || c.RMSNormEps != 1e-6 {
		t.Errorf("config %+v", c)
	}
	if len(ref.Tensors) != len(ck.Tensors) {
		t.Errorf("%d tensors, transformers has %d (without the tied lm_head)", len(ck.Tensors), len(ref.Tensors))
	}
	params := 0
	for name, want := range ref.Tensors {
		got := ck.Tensors[name]
		if got == nil {
			t.Errorf("missing %s", name)
			continue
		}
		params += len(got.Data)
		checkFigures(t, name, got, want, 1e-6)
	}
	t.Logf("%d parameters", params)
}

// ggufWithKV copies the GGUF file src with one more metadata key (typ: a GGUF value type;
// val: the encoded value) and a padding string key, sized so that everything after the
// header moves by a multiple of the 32-byte alignment.
func ggufWithKV(t *testing.T, src, key string, typ gguf.ValueType, val []byte) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	kv := func(k string, typ gguf.ValueType, v []byte) []byte {
		out := binary.LittleEndian.AppendUint64(nil, uint64(len(k)))
		out = append(out, k...)
		out = binary.LittleEndian.AppendUint32(out, uint32(typ))
		return append(out, v...)
	}
	add := kv(key, typ, val)
	padKey := "test.pad." + key
	pad := kv(padKey, gguf.TypeString, binary.LittleEndian.AppendUint64(nil, 0))
	n := (32 - (len(add)+len(pad))%32) % 32
	pad = kv(padKey, gguf.TypeString, append(binary.LittleEndian.AppendUint64(nil, uint64(n)), strings.Repeat("x", n)...))
	out := append([]byte(nil), b[:24]...)
	binary.LittleEndian.PutUint64(out[16:], binary.LittleEndian.Uint64(b[16:])+2)
	out = append(append(append(out, add...), pad...), b[24:]...)
	p := filepath.Join(t.TempDir(), filepath.Base(src))
	if err := os.WriteFile(p, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func ggufString(s string) []byte {
	return append(binary.LittleEndian.AppendUint64(nil, uint64(len(s))), s...)
}

func ggufF32(v float32) []byte { return binary.LittleEndian.AppendUint32(nil, math.Float32bits(v)) }

func ggufU32(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }

// TestGGUFFamilyErrors: what the loader refuses in the new architectures' files, by name.
func TestGGUFFamilyErrors(t *testing.T) {
	boolArray := func(vals ...bool) []byte {
		out := binary.LittleEndian.AppendUint32(nil, uint32(gguf.TypeBool))
		out = binary.LittleEndian.AppendUint64(out, uint64(len(vals)))
		for _, v := range vals {
			if v {
				out = append(out, 1)
			} else {
				out = append(out, 0)
			}
		}
		return out
	}
	tests := []struct {
		name, src, key string
		typ            gguf.ValueType
		val            []byte
		want           string
	}{
		{"gemma attention soft-capping", "gemma3.gguf", "gemma3.attn_logit_softcapping", gguf.TypeFloat32, ggufF32(50),
			"gemma3.attn_logit_softcapping = 50 is not supported"},
		{"gemma pattern length", "gemma3.gguf", "gemma3.attention.sliding_window_pattern", gguf.TypeArray, boolArray(true, false),
			"gemma3.attention.sliding_window_pattern has 2 entries for 6 layers"},
		{"llama window", "mistral.gguf", "llama.attention.sliding_window", gguf.TypeUint32, ggufU32(4096),
			"llama.attention.sliding_window = 4096: llama.cpp's llama has no sliding window"},
		{"qwen3 window", "qwen3.gguf", "qwen3.attention.sliding_window", gguf.TypeUint32, ggufU32(4096),
			"qwen3.attention.sliding_window = 4096"},
		{"longrope", "qwen3.gguf", "qwen3.rope.scaling.type", gguf.TypeString, ggufString("longrope"),
			`qwen3.rope.scaling.type = "longrope" is not supported`},
		{"linear without factor", "qwen3.gguf", "qwen3.rope.scaling.type", gguf.TypeString, ggufString("linear"),
			"qwen3.rope.scaling.type = linear needs qwen3.rope.scaling.factor > 0"},
		{"yarn attention factor", "qwen3-yarn.gguf", "qwen3.rope.scaling.yarn_attn_factor", gguf.TypeFloat32, ggufF32(1.2),
			"qwen3.rope.scaling.yarn_attn_factor is not supported"},
		{"rope_freqs with a scaling type", "llama3.gguf", "llama.rope.scaling.type", gguf.TypeString, ggufString("linear"),
			`tensor rope_freqs.weight with llama.rope.scaling.type = "linear"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := ggufWithKV(t, filepath.Join("testdata", tc.src), tc.key, tc.typ, tc.val)
			_, err := Load(p)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.src) ||
				!strings.HasPrefix(err.Error(), "weights: ") {
				t.Errorf("err = %v\nwant it to name %s and contain %q", err, tc.src, tc.want)
			}
		})
	}
	// a hostile layer count is refused before anything is sized by it
	p := patchFile(t, "testdata/gemma3.gguf", "gemma3.block_count", "\x04\x00\x00\x00\x06\x00\x00\x00", "\x04\x00\x00\x00\xff\xff\xff\x7f")
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "gemma3.block_count = 2147483647 is out of range") {
		t.Errorf("huge block_count: err = %v", err)
	}
	// the same keys with accepted values load
	p = ggufWithKV(t, "testdata/gemma3.gguf", "gemma3.attention.sliding_window_pattern", gguf.TypeArray,
		boolArray(true, false, true, false, true, false))
	c := mustLoad(t, p).Config
	s, f := "sliding_attention", "full_attention"
	if !reflect.DeepEqual(c.LayerTypes, []string{s, f, s, f, s, f}) {
		t.Errorf("per-layer sliding_window_pattern: layer_types %v", c.LayerTypes)
	}
	c = mustLoad(t, ggufWithKV(t, "testdata/gemma3.gguf", "gemma3.attention.sliding_window_pattern", gguf.TypeUint32, ggufU32(3))).Config
	if !reflect.DeepEqual(c.LayerTypes, []string{s, s, f, s, s, f}) {
		t.Errorf("sliding_window_pattern 3: layer_types %v", c.LayerTypes)
	}
	c = mustLoad(t, ggufWithKV(t, "testdata/gemma3.gguf", "gemma3.final_logit_softcapping", gguf.TypeFloat32, ggufF32(30))).Config
	if c.FinalLogitSoftcapping != 30 {
		t.Errorf("final_logit_softcapping %v, want 30", c.FinalLogitSoftcapping)
	}
	p = ggufWithKV(t, "testdata/qwen3.gguf", "qwen3.rope.scaling.type", gguf.TypeString, ggufString("linear"))
	c = mustLoad(t, ggufWithKV(t, p, "qwen3.rope.scaling.factor", gguf.TypeFloat32, ggufF32(2))).Config
	if s := c.RopeScaling; s == nil || *s != (RopeScaling{Type: "linear", Factor: 2}) {
		t.Errorf("linear scaling: %+v", s)
	}
	c = mustLoad(t, ggufWithKV(t, "testdata/qwen3.gguf", "qwen3.rope.scaling.type", gguf.TypeString, ggufString("none"))).Config
	if c.RopeScaling != nil {
		t.Errorf("rope.scaling.type none: %+v", c.RopeScaling)
	}
}
