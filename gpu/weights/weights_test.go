package weights

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/safetensors"
)

// figures are reference values of one tensor, as scripts/goldens/weights/weights_golden.py
// computes them from torch's state dict.
type figures struct {
	Shape []int     `json:"shape"`
	Sum   float64   `json:"sum"`
	WSum  float64   `json:"wsum"`
	Head  []float64 `json:"head"`
	Row1  []float64 `json:"row1"`
	Row33 []float64 `json:"row33"`
}

func compute(data []float32) (sum, wsum float64) {
	for i, x := range data {
		sum += float64(x)
		wsum += float64(x) * (1 + float64(i%251)/251)
	}
	return sum, wsum
}

// checkFigures compares a tensor with its reference values; tol is relative to the sum of |x|.
func checkFigures(t *testing.T, name string, got *Tensor, want figures, tol float64) {
	t.Helper()
	if !reflect.DeepEqual(got.Shape, want.Shape) {
		t.Errorf("%s: shape %v, want %v", name, got.Shape, want.Shape)
		return
	}
	var abs float64
	for _, x := range got.Data {
		abs += math.Abs(float64(x))
	}
	sum, wsum := compute(got.Data)
	if math.Abs(sum-want.Sum) > tol*abs+1e-9 || math.Abs(wsum-want.WSum) > 2*tol*abs+1e-9 {
		t.Errorf("%s: sum %.9g wsum %.9g, want %.9g %.9g", name, sum, wsum, want.Sum, want.WSum)
	}
	for i, w := range want.Head {
		if math.Abs(float64(got.Data[i])-w) > tol*math.Abs(w)+1e-12 {
			t.Errorf("%s[%d] = %v, want %v", name, i, got.Data[i], w)
			break
		}
	}
}

func loadGolden(t *testing.T) map[string]map[string]figures {
	b, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var g map[string]map[string]figures
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

func mustLoad(t *testing.T, path string) *Checkpoint {
	t.Helper()
	ck, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return ck
}

// TestF32MatchesTorch: the F32 safetensors load equals torch's state dict.
func TestF32MatchesTorch(t *testing.T) {
	g := loadGolden(t)
	for _, arch := range []string{"llama", "qwen2"} {
		ck := mustLoad(t, filepath.Join("testdata", arch))
		for name, want := range g[arch] {
			got, ok := ck.Tensors[name]
			if !ok {
				if name == "lm_head.weight" && ck.Config.TieWordEmbeddings {
					continue // transformers lists the tied head in its state dict but does not save it
				}
				t.Errorf("%s: missing %s", arch, name)
				continue
			}
			checkFigures(t, arch+" "+name, got, want, 1e-12)
		}
	}
}

func TestConfig(t *testing.T) {
	tests := []struct {
		path string
		want Config
	}{
		{"testdata/llama", Config{Architectures: []string{"LlamaForCausalLM"}, ModelType: "llama", HiddenSize: 64, IntermediateSize: 128,
			NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 16, VocabSize: 320, MaxPositionEmbeddings: 128,
			RMSNormEps: 1e-5, RopeTheta: 10000, BOSTokenID: 1, EOSTokenID: 2, EOSTokenIDs: []int{2}, HiddenAct: "silu", TorchDtype: "float32"}},
		{"testdata/qwen2", Config{Architectures: []string{"Qwen2ForCausalLM"}, ModelType: "qwen2", HiddenSize: 64, IntermediateSize: 128,
			NumHiddenLayers: 2, NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 16, VocabSize: 320, MaxPositionEmbeddings: 128,
			RMSNormEps: 1e-6, RopeTheta: 1e6, TieWordEmbeddings: true, AttentionBias: true, BOSTokenID: 1, EOSTokenID: 2, EOSTokenIDs: []int{2},
			HiddenAct: "silu", TorchDtype: "float32"}},
	}
	for _, tc := range tests {
		for _, path := range []string{tc.path, tc.path + ".gguf", tc.path + "-q8_0.gguf"} {
			ck := mustLoad(t, path)
			want := tc.want
			if strings.HasSuffix(path, ".gguf") {
				want.MaxPositionEmbeddings = 128
			}
			if !reflect.DeepEqual(ck.Config, want) {
				t.Errorf("%s: config\n%+v\nwant\n%+v", path, ck.Config, want)
			}
		}
	}
}

// TestFormatsAgree: every format loads to the F32 safetensors tensors, exactly for F32 (GGUF
// included, so the Q/K permutation is undone exactly) and within rounding for the others.
func TestFormatsAgree(t *testing.T) {
	tests := []struct {
		ref, path string
		tol       func(ref []float32, i int) float64 // allowed |got-ref| at i
	}{
		{"llama", "llama.gguf", exact},
		{"qwen2", "qwen2.gguf", exact},
		{"llama", "llama-sharded", exact},
		{"llama", "llama-f16", func(r []float32, i int) float64 { return math.Abs(float64(r[i]))*0x1p-11 + 0x1p-25 }},
		{"qwen2", "qwen2-bf16", func(r []float32, i int) float64 { return math.Abs(float64(r[i])) * 0x1p-8 }},
		{"llama", "llama-q8_0.gguf", q8Tol},
		{"qwen2", "qwen2-q8_0.gguf", q8Tol},
	}
	for _, tc := range tests {
		ref := mustLoad(t, filepath.Join("testdata", tc.ref))
		got := mustLoad(t, filepath.Join("testdata", tc.path))
		names := sortedNames(ref)
		if gotNames := sortedNames(got); !reflect.DeepEqual(gotNames, names) {
			t.Errorf("%s: tensors %v, want %v", tc.path, gotNames, names)
			continue
		}
		for _, name := range names {
			r, g := ref.Tensors[name], got.Tensors[name]
			if !reflect.DeepEqual(r.Shape, g.Shape) {
				t.Errorf("%s %s: shape %v, want %v", tc.path, name, g.Shape, r.Shape)
				continue
			}
			tol := tc.tol
			if strings.HasSuffix(tc.path, "q8_0.gguf") && len(r.Shape) == 1 {
				tol = exact // the converter keeps 1-D tensors in F32
			}
			for i := range r.Data {
				if d := math.Abs(float64(g.Data[i] - r.Data[i])); d > tol(r.Data, i) {
					t.Errorf("%s %s[%d] = %v, want %v (|diff| %g > %g)", tc.path, name, i, g.Data[i], r.Data[i], d, tol(r.Data, i))
					break
				}
			}
		}
	}
}

func exact([]float32, int) float64 { return 0 }

// q8Tol bounds a Q8_0 error: half a step of d = max|x|/127 over the block of 32, plus the fp16
// rounding of d (2^-11 relative) times the largest quant, 127.
func q8Tol(r []float32, i int) float64 {
	b := i / 32 * 32
	var amax float64
	for _, x := range r[b : b+32] {
		amax = math.Max(amax, math.Abs(float64(x)))
	}
	d := amax / 127
	return d/2 + 127*d*0x1p-11 + 1e-9
}

func sortedNames(ck *Checkpoint) []string {
	var n []string
	for k := range ck.Tensors {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

func TestPermuteRows(t *testing.T) {
	// 2 heads of head_dim 4, 1 column: HF rows 0..7. GGUF row h*hd+2i+s = HF row h*hd+s*hd/2+i.
	hf := []float32{0, 1, 2, 3, 4, 5, 6, 7}
	want := []float32{0, 2, 1, 3, 4, 6, 5, 7}
	if got := PermuteRows(hf, 2, 4); !reflect.DeepEqual(got, want) {
		t.Errorf("PermuteRows = %v, want %v", got, want)
	}
	if got := UnpermuteRows(want, 2, 4); !reflect.DeepEqual(got, hf) {
		t.Errorf("UnpermuteRows = %v, want %v", got, hf)
	}
	// Several columns move with their row.
	w := make([]float32, 3*8*5)
	for i := range w {
		w[i] = float32(i)
	}
	if got := UnpermuteRows(PermuteRows(w, 3, 8), 3, 8); !reflect.DeepEqual(got, w) {
		t.Errorf("round trip differs")
	}
}

func TestHFName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"token_embd.weight", "model.embed_tokens.weight"},
		{"output_norm.weight", "model.norm.weight"},
		{"output.weight", "lm_head.weight"},
		{"blk.0.attn_norm.weight", "model.layers.0.input_layernorm.weight"},
		{"blk.12.attn_q.bias", "model.layers.12.self_attn.q_proj.bias"},
		{"blk.3.ffn_down.weight", "model.layers.3.mlp.down_proj.weight"},
		{"blk.3.ffn_norm.weight", "model.layers.3.post_attention_layernorm.weight"},
		{"blk.03.ffn_up.weight", ""},
		{"blk.-1.ffn_up.weight", ""},
		{"blk.1.attn_qkv.weight", ""},
		{"rope_freqs.weight", ""},
	}
	for _, tc := range tests {
		got, ok := HFName(tc.in)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("HFName(%q) = %q, %v; want %q", tc.in, got, ok, tc.want)
		}
	}
}

func TestSaveLoadRoundTrip(t *testing.T) {
	for _, src := range []string{"llama", "qwen2", "llama.gguf", "qwen2-q8_0.gguf", "qwen3.gguf", "gemma3.gguf", "llama3.gguf", "qwen3-yarn.gguf", "mistral.gguf", "micro-gemma3-q8_0.gguf"} {
		ck := mustLoad(t, filepath.Join("testdata", src))
		dir := filepath.Join(t.TempDir(), "saved")
		if err := Save(dir, ck); err != nil {
			t.Fatal(err)
		}
		back := mustLoad(t, dir)
		if !reflect.DeepEqual(back.Config, ck.Config) {
			t.Errorf("%s: config after round trip\n%+v\nwant\n%+v", src, back.Config, ck.Config)
		}
		if !reflect.DeepEqual(sortedNames(back), sortedNames(ck)) {
			t.Errorf("%s: tensors %v, want %v", src, sortedNames(back), sortedNames(ck))
		}
		for name, want := range ck.Tensors {
			if got := back.Tensors[name]; got == nil || !reflect.DeepEqual(got.Shape, want.Shape) || !reflect.DeepEqual(got.Data, want.Data) {
				t.Errorf("%s: %s differs after Save/Load", src, name)
			}
		}
	}
}

// TestSaveForTransformers writes weights.Save output for the golden script to load with
// transformers; it runs only when RLHOST_WEIGHTS_SAVE_DIR is set (see weights_golden.py).
func TestSaveForTransformers(t *testing.T) {
	out := os.Getenv("RLHOST_WEIGHTS_SAVE_DIR")
	if out == "" {
		t.Skip("RLHOST_WEIGHTS_SAVE_DIR not set; scripts/goldens/weights/weights_golden.py sets it")
	}
	for _, src := range []string{"llama.gguf", "llama-q8_0.gguf", "qwen2.gguf", "qwen2-q8_0.gguf", "qwen2-bf16", "llama-sharded"} {
		ck := mustLoad(t, filepath.Join("testdata", src))
		if err := Save(filepath.Join(out, src), ck); err != nil {
			t.Fatal(err)
		}
	}
}

// smolPath is where `make model` puts the default model.
const smolPath = "../../models/SmolLM2-135M-Instruct.Q4_1.gguf"

func needSmol(t testing.TB) {
	if _, err := os.Stat(smolPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing: run `make model` (CI is set, so this fails)", smolPath)
		}
		t.Skipf("%s is missing: run `make model`", smolPath)
	}
}

func TestSmolLM2(t *testing.T) {
	needSmol(t)
	ck := mustLoad(t, smolPath)
	c := ck.Config
	if c.ModelType != "llama" || c.NumHiddenLayers != 30 || c.HiddenSize != 576 || c.NumAttentionHeads != 9 ||
		c.NumKeyValueHeads != 3 || c.VocabSize != 49152 || !c.TieWordEmbeddings || c.RopeTheta != 100000 ||
		c.IntermediateSize != 1536 || c.RMSNormEps != 1e-5 || c.AttentionBias || headDim(c) != 64 ||
		c.BOSTokenID != 1 || c.EOSTokenID != 2 || c.MaxPositionEmbeddings != 8192 {
		t.Errorf("config %+v", c)
	}
	if _, ok := ck.Tensors["lm_head.weight"]; ok {
		t.Errorf("tied model has lm_head.weight")
	}
	var params int
	for _, tt := range ck.Tensors {
		params += len(tt.Data)
	}
	if params != 134515008 {
		t.Errorf("%d parameters, want 134515008", params)
	}
	// Reference values from transformers loading the same file (smollm2.json).
	b, err := os.ReadFile("testdata/smollm2.json")
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Tensors map[string]figures `json:"tensors"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	if len(ref.Tensors) != len(ck.Tensors) {
		t.Errorf("%d tensors, transformers has %d (without the tied lm_head)", len(ck.Tensors), len(ref.Tensors))
	}
	for name, want := range ref.Tensors {
		got := ck.Tensors[name]
		if got == nil {
			t.Errorf("missing %s", name)
			continue
		}
		checkFigures(t, name, got, want, 1e-6)
		cols := got.Shape[len(got.Shape)-1]
		for _, row := range []struct {
			r    int
			want []float64
		}{{1, want.Row1}, {33, want.Row33}} {
			for i, w := range row.want {
				if g := got.Data[row.r*cols+i]; math.Abs(float64(g)-w) > 1e-6*math.Abs(w) {
					t.Errorf("%s[%d][%d] = %v, transformers has %v", name, row.r, i, g, w)
					break
				}
			}
		}
	}
}

// The eos ids are config.json's eos_token_id (absent, null, [], an id or a list) followed by
// the ids of generation_config.json's (when the file exists) that config.json lacks, each once;
// none is NoEOS (EOSTokenID 0 is then no id). Save writes them back as config.json's
// eos_token_id (null for none, a list for several) and a reload gives the same ids.
func TestEOSIDs(t *testing.T) {
	const base = `{"model_type":"llama","hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":10,"rms_norm_eps":1e-5,"rope_theta":10000`
	const noFile = "-"
	tests := []struct {
		config, generation string // generation: generation_config.json's text, noFile for none
		want               []int
	}{
		{"", noFile, nil},
		{`,"eos_token_id":null`, noFile, nil},
		{`,"eos_token_id":[]`, noFile, nil},
		{`,"eos_token_id":0`, noFile, []int{0}},
		{`,"eos_token_id":2`, noFile, []int{2}},
		{`,"eos_token_id":[3,4]`, noFile, []int{3, 4}},
		{`,"eos_token_id":[128001, 128008, 128009]`, noFile, []int{128001, 128008, 128009}}, // Llama 3.1 Instruct
		{`,"eos_token_id":[5,5,3]`, noFile, []int{5, 3}},
		{`,"eos_token_id":151645`, `{"bos_token_id":151643,"eos_token_id":[151645,151643],"top_p":0.8}`, []int{151645, 151643}}, // Qwen2.5 Instruct
		{`,"eos_token_id":151643`, `{"eos_token_id":[151645,151643]}`, []int{151643, 151645}},
		{`,"eos_token_id":[128001, 128008, 128009]`, `{"eos_token_id":[128001, 128009]}`, []int{128001, 128008, 128009}},
		{"", `{"eos_token_id":7}`, []int{7}},
		{`,"eos_token_id":null`, `{"eos_token_id":[]}`, nil},
		{`,"eos_token_id":2`, `{"eos_token_id":null}`, []int{2}},
		{`,"eos_token_id":2`, `{"bos_token_id":1}`, []int{2}},
		{`,"eos_token_id":2`, `{}`, []int{2}},
	}
	for _, tt := range tests {
		dir := t.TempDir()
		os.WriteFile(filepath.Join(dir, "config.json"), []byte(base+tt.config+"}"), 0o644)
		if tt.generation != noFile {
			os.WriteFile(filepath.Join(dir, GenerationConfigFile), []byte(tt.generation), 0o644)
		}
		c, err := readConfig(filepath.Join(dir, "config.json"))
		if err != nil {
			t.Fatalf("%s + %s: %v", tt.config, tt.generation, err)
		}
		if !slices.Equal(c.EOSIDs(), tt.want) || c.NoEOS != (tt.want == nil) || (tt.want != nil && c.EOSTokenID != tt.want[0]) {
			t.Errorf("%s + %s: ids %v (first %d, NoEOS %v); want %v", tt.config, tt.generation, c.EOSIDs(), c.EOSTokenID, c.NoEOS, tt.want)
		}
		b, err := configJSON(c, safetensors.F32)
		if err != nil {
			t.Fatal(err)
		}
		var saved struct {
			EOS json.RawMessage `json:"eos_token_id"`
		}
		json.Unmarshal(b, &saved)
		wantJSON := "null"
		switch w, _ := json.Marshal(tt.want); len(tt.want) {
		case 1:
			wantJSON = strconv.Itoa(tt.want[0])
		case 2, 3:
			wantJSON = string(w)
		}
		var got bytes.Buffer
		json.Compact(&got, saved.EOS)
		if got.String() != wantJSON {
			t.Errorf("%s + %s: saved eos_token_id %s; want %s", tt.config, tt.generation, saved.EOS, wantJSON)
		}
		back, err := ParseConfig("saved", b)
		if err != nil || !slices.Equal(back.EOSIDs(), c.EOSIDs()) || back.NoEOS != c.NoEOS || back.EOSTokenID != c.EOSTokenID {
			t.Errorf("%s + %s saved as eos_token_id %s: ids %v NoEOS %v (%v)", tt.config, tt.generation, saved.EOS, back.EOSIDs(), back.NoEOS, err)
		}
	}
}

// Bad eos_token_id values are errors naming the file and the key.
func TestEOSErrors(t *testing.T) {
	const base = `{"model_type":"llama","hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":10`
	for _, eos := range []string{`"2"`, `2.5`, `[2, "</s>"]`, `[[2]]`, `{}`, `true`, `-1`, `[2, 4294967296]`} {
		_, err := ParseConfig("dir/config.json", []byte(base+`,"eos_token_id":`+eos+`}`))
		if err == nil || !strings.HasPrefix(err.Error(), "weights: dir/config.json: eos_token_id: ") {
			t.Errorf("config.json eos_token_id %s: err %v", eos, err)
		}
		c := Config{}
		c.setEOS([]int{2})
		err = AddGenerationConfig(&c, "dir/generation_config.json", []byte(`{"eos_token_id":`+eos+`}`))
		if err == nil || !strings.HasPrefix(err.Error(), "weights: dir/generation_config.json: eos_token_id: ") {
			t.Errorf("generation_config.json eos_token_id %s: err %v", eos, err)
		}
	}
	for _, b := range []string{`{`, `[2]`, `"x"`} {
		c := Config{}
		if err := AddGenerationConfig(&c, "dir/generation_config.json", []byte(b)); err == nil || !strings.HasPrefix(err.Error(), "weights: dir/generation_config.json: ") {
			t.Errorf("generation_config.json %s: err %v", b, err)
		}
	}
}

// A GGUF's eos id is its tokenizer.ggml.eos_token_id, alone.
func TestGGUFEOS(t *testing.T) {
	ck, err := LoadGGUF("testdata/llama.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if ids := ck.Config.EOSIDs(); ck.Config.NoEOS || len(ids) != 1 || ids[0] != ck.Config.EOSTokenID {
		t.Errorf("eos ids %v (first %d, NoEOS %v)", ids, ck.Config.EOSTokenID, ck.Config.NoEOS)
	}
}
