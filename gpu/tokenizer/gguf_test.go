package tokenizer

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/gguf"
)

func ggufJSON(t testing.TB, path string) ([]byte, Config) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	data, cfg, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return data, cfg
}

// ggufBuilder writes small GGUF v3 files (metadata only) for tests.
type ggufBuilder struct {
	kvs bytes.Buffer
	n   uint64
}

func (b *ggufBuilder) str(w *bytes.Buffer, s string) {
	binary.Write(w, binary.LittleEndian, uint64(len(s)))
	w.WriteString(s)
}

func (b *ggufBuilder) String(key, val string) *ggufBuilder {
	b.str(&b.kvs, key)
	binary.Write(&b.kvs, binary.LittleEndian, uint32(8))
	b.str(&b.kvs, val)
	b.n++
	return b
}

func (b *ggufBuilder) Uint32(key string, v uint32) *ggufBuilder {
	b.str(&b.kvs, key)
	binary.Write(&b.kvs, binary.LittleEndian, uint32(4))
	binary.Write(&b.kvs, binary.LittleEndian, v)
	b.n++
	return b
}

func (b *ggufBuilder) Strings(key string, vals ...string) *ggufBuilder {
	b.str(&b.kvs, key)
	binary.Write(&b.kvs, binary.LittleEndian, uint32(9))
	binary.Write(&b.kvs, binary.LittleEndian, uint32(8))
	binary.Write(&b.kvs, binary.LittleEndian, uint64(len(vals)))
	for _, v := range vals {
		b.str(&b.kvs, v)
	}
	b.n++
	return b
}

func (b *ggufBuilder) Int32s(key string, vals ...int32) *ggufBuilder {
	b.str(&b.kvs, key)
	binary.Write(&b.kvs, binary.LittleEndian, uint32(9))
	binary.Write(&b.kvs, binary.LittleEndian, uint32(5))
	binary.Write(&b.kvs, binary.LittleEndian, uint64(len(vals)))
	for _, v := range vals {
		binary.Write(&b.kvs, binary.LittleEndian, v)
	}
	b.n++
	return b
}

func (b *ggufBuilder) Bytes() []byte {
	var w bytes.Buffer
	w.WriteString("GGUF")
	binary.Write(&w, binary.LittleEndian, uint32(3))
	binary.Write(&w, binary.LittleEndian, uint64(0)) // tensors
	binary.Write(&w, binary.LittleEndian, b.n)
	w.Write(b.kvs.Bytes())
	return w.Bytes()
}

// tinyGGUF is a valid byte-level BPE tokenizer over "a", "b", "ab" and two control tokens.
func tinyGGUF() *ggufBuilder {
	return new(ggufBuilder).
		String("general.architecture", "llama").
		String("tokenizer.ggml.model", "gpt2").
		String("tokenizer.ggml.pre", "smollm").
		Strings("tokenizer.ggml.tokens", "<s>", "</s>", "a", "b", "ab", "Ġ", "1").
		Int32s("tokenizer.ggml.token_type", 3, 3, 1, 1, 1, 1, 1).
		Strings("tokenizer.ggml.merges", "a b").
		Uint32("tokenizer.ggml.eos_token_id", 1).
		String("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}")
}

func TestTinyGGUF(t *testing.T) {
	f, err := gguf.Parse("tiny.gguf", tinyGGUF().Bytes())
	if err != nil {
		t.Fatal(err)
	}
	data, cfg, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := FromJSON("tiny.gguf", data, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	if got := tk.Encode("ab a</s>11", false); !equalInts(got, []int{4, 5, 2, 1, 6, 6}) {
		t.Errorf("Encode = %v", got)
	}
	if tk.EOS() != 1 || tk.BOS() != -1 {
		t.Errorf("eos %d bos %d", tk.EOS(), tk.BOS())
	}
	if got := tk.Decode([]int{4, 5, 2, 1}, true); got != "ab a" {
		t.Errorf("Decode = %q", got)
	}
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

// TestGGUFErrors: bad tokenizer metadata gives an error naming the file and the key.
func TestGGUFErrors(t *testing.T) {
	tests := []struct {
		name string
		file []byte
		want string
	}{
		{"no tokenizer", new(ggufBuilder).String("general.architecture", "llama").Bytes(), "tokenizer.ggml.model is missing"},
		{"wordpiece", new(ggufBuilder).String("tokenizer.ggml.model", "bert").Bytes(), `tokenizer.ggml.model "bert" is not supported`},
		{"spm without scores", new(ggufBuilder).String("tokenizer.ggml.model", "llama").Strings("tokenizer.ggml.tokens", "a").Bytes(), "tokenizer.ggml.scores"},
		{"spm scores length", new(ggufBuilder).String("tokenizer.ggml.model", "llama").Strings("tokenizer.ggml.tokens", "a").
			Float32s("tokenizer.ggml.scores", 1, 2).Bytes(), "tokenizer.ggml.scores has 2 entries for 1 tokens"},
		{"spm NaN score", new(ggufBuilder).String("tokenizer.ggml.model", "llama").Strings("tokenizer.ggml.tokens", "a", "b").
			Float32s("tokenizer.ggml.scores", 0, float32(math.NaN())).Bytes(), "tokenizer.ggml.scores[1] is NaN"},
		{"spm bos out of range", tinySPM().Uint32("tokenizer.ggml.bos_token_id", 99).Bytes(), "tokenizer.ggml.bos_token_id = 99 is not a token id"},
		{"spm long tokens", new(ggufBuilder).String("tokenizer.ggml.model", "llama").
			Strings("tokenizer.ggml.tokens", strings.Repeat("a", 1<<15), strings.Repeat("b", 1<<15)).Float32s("tokenizer.ggml.scores", 0, 0).Bytes(),
			"tokens are too long to derive merges from"},
		{"spm extra whitespace", tinySPM().Bool("tokenizer.ggml.remove_extra_whitespaces", true).Bytes(), "remove_extra_whitespaces = true is not supported"},
		{"spm prefix not bool", tinySPM().String("tokenizer.ggml.add_space_prefix", "yes").Bytes(), "tokenizer.ggml.add_space_prefix"},
		{"unknown pre", new(ggufBuilder).String("tokenizer.ggml.model", "gpt2").String("tokenizer.ggml.pre", "klingon").
			Strings("tokenizer.ggml.tokens", "a").Strings("tokenizer.ggml.merges").Bytes(), `tokenizer.ggml.pre "klingon"`},
		{"no tokens", new(ggufBuilder).String("tokenizer.ggml.model", "gpt2").Bytes(), "tokenizer.ggml.tokens"},
		{"bad merge", new(ggufBuilder).String("tokenizer.ggml.model", "gpt2").Strings("tokenizer.ggml.tokens", "a", "b").
			Strings("tokenizer.ggml.merges", "a b").Bytes(), `merges[0] = "a b": the merged token "ab"`},
		{"merge without space", new(ggufBuilder).String("tokenizer.ggml.model", "gpt2").Strings("tokenizer.ggml.tokens", "a").
			Strings("tokenizer.ggml.merges", "ab").Bytes(), `tokenizer.ggml.merges[0] = "ab" is not two tokens`},
		{"types length", new(ggufBuilder).String("tokenizer.ggml.model", "gpt2").Strings("tokenizer.ggml.tokens", "a").
			Int32s("tokenizer.ggml.token_type", 1, 1).Strings("tokenizer.ggml.merges").Bytes(), "token_type has 2 entries for 1 tokens"},
		{"bad type", new(ggufBuilder).String("tokenizer.ggml.model", "gpt2").Strings("tokenizer.ggml.tokens", "a").
			Int32s("tokenizer.ggml.token_type", 9).Strings("tokenizer.ggml.merges").Bytes(), "token_type[0] = 9"},
		{"eos out of range", new(ggufBuilder).String("tokenizer.ggml.model", "gpt2").Strings("tokenizer.ggml.tokens", "a").
			Strings("tokenizer.ggml.merges").Uint32("tokenizer.ggml.eos_token_id", 7).Bytes(), "tokenizer.ggml.eos_token_id = 7 is not a token id"},
		{"tokens wrong type", new(ggufBuilder).String("tokenizer.ggml.model", "gpt2").String("tokenizer.ggml.tokens", "a").Bytes(), "tokenizer.ggml.tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "bad.gguf")
			if err := os.WriteFile(path, tt.file, 0o644); err != nil {
				t.Fatal(err)
			}
			tk, err := Load(path)
			if err == nil {
				tk.Close()
				t.Fatal("Load succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "bad.gguf") {
				t.Errorf("error %q does not name the file and %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "tokenizer: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	emptyDir := filepath.Join(dir, "empty")
	os.Mkdir(emptyDir, 0o755)
	write("corrupt/tokenizer.json", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [`)
	write("nomodel/tokenizer.json", `{"added_tokens": []}`)
	write("badmodel/tokenizer.json", `{"model": {"type": "Klingon", "vocab": {"a": 0}}}`)
	write("badcfg/tokenizer.json", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`)
	write("badcfg/tokenizer_config.json", `{"eos_token": 5}`)
	write("unkeos/tokenizer.json", `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`)
	write("unkeos/tokenizer_config.json", `{"eos_token": "</s>"}`)
	write("trunc.gguf", "GGUF\x03\x00\x00\x00\x00")
	tests := []struct {
		path string
		want string
	}{
		{filepath.Join(dir, "missing"), "no such file"},
		{emptyDir, "no tokenizer.json in the model directory"},
		{filepath.Join(dir, "corrupt"), "corrupt/tokenizer.json: not a valid tokenizer.json"},
		{filepath.Join(dir, "nomodel"), `has no "model"`},
		{filepath.Join(dir, "badmodel"), "badmodel/tokenizer.json"},
		{filepath.Join(dir, "badcfg"), "tokenizer_config.json: key eos_token"},
		{filepath.Join(dir, "unkeos"), `eos_token "</s>" is not in the vocabulary`},
		{filepath.Join(dir, "trunc.gguf"), "trunc.gguf"},
	}
	for _, tt := range tests {
		tk, err := Load(tt.path)
		if err == nil {
			tk.Close()
			t.Errorf("Load(%s) succeeded", tt.path)
			continue
		}
		if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "tokenizer: ") {
			t.Errorf("Load(%s) = %q, want it to contain %q", tt.path, err, tt.want)
		}
	}
	_, err := Load(filepath.Join(dir, "corrupt"))
	if !errors.Is(err, ErrFormat) {
		t.Errorf("corrupt tokenizer.json error %v does not wrap ErrFormat", err)
	}
}

// FuzzFromGGUF: arbitrary bytes through the GGUF reader and the conversion
// never panic.
func FuzzFromGGUF(f *testing.F) {
	f.Add(tinyGGUF().Bytes())
	f.Add(tinySPM().Bytes())
	f.Add(tinySPM().Bool("tokenizer.ggml.add_space_prefix", false).Uint32("tokenizer.ggml.eos_token_id", 12).Bytes())
	f.Add(new(ggufBuilder).String("tokenizer.ggml.model", "gpt2").Bytes())
	f.Add(new(ggufBuilder).String("tokenizer.ggml.model", "gpt2").Strings("tokenizer.ggml.tokens", "a", "b", "ab").
		Strings("tokenizer.ggml.merges", "a b", "ab").Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		gf, err := gguf.Parse("fuzz.gguf", data)
		if err != nil {
			return
		}
		js, cfg, err := FromGGUF(gf)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tokenizer: ") {
				t.Errorf("error without prefix: %v", err)
			}
			return
		}
		tk, err := FromJSON("fuzz.gguf", js, cfg)
		if err != nil {
			return
		}
		defer tk.Close()
		ids := tk.Encode("ab 12 a", true)
		tk.Decode(ids, false)
	})
}

// TestGGUFQwen2Conversion checks the "qwen2" pre-tokenizer branch of FromGGUF
// end to end: the Qwen3 tokenizer.json is written as GGUF tokenizer metadata
// (as llama.cpp's converter does: vocabulary by id, merges as "a b", added
// special tokens as control, other added tokens as user-defined), converted
// back, and must reproduce the Qwen3 goldens of Python tokenizers.
func TestGGUFQwen2Conversion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 150k-token GGUF")
	}
	data, err := os.ReadFile(filepath.Join(qwen3Dir(t), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tj struct {
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Model struct {
			Vocab  map[string]int `json:"vocab"`
			Merges [][2]string    `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(data, &tj); err != nil {
		t.Fatal(err)
	}
	n := len(tj.Model.Vocab) + len(tj.AddedTokens)
	tokens := make([]string, n)
	types := make([]int32, n)
	for tok, id := range tj.Model.Vocab {
		tokens[id], types[id] = tok, ggufTokenNormal
	}
	for _, a := range tj.AddedTokens {
		tokens[a.ID], types[a.ID] = a.Content, ggufTokenUserDefined
		if a.Special {
			types[a.ID] = ggufTokenControl
		}
	}
	merges := make([]string, len(tj.Model.Merges))
	for i, m := range tj.Model.Merges {
		merges[i] = m[0] + " " + m[1]
	}
	b := new(ggufBuilder).
		String("tokenizer.ggml.model", "gpt2").
		String("tokenizer.ggml.pre", "qwen2").
		Strings("tokenizer.ggml.tokens", tokens...).
		Int32s("tokenizer.ggml.token_type", types...).
		Strings("tokenizer.ggml.merges", merges...).
		Uint32("tokenizer.ggml.eos_token_id", 151645).
		Uint32("tokenizer.ggml.padding_token_id", 151643)
	gf, err := gguf.Parse("qwen3-as.gguf", b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	js, cfg, err := FromGGUF(gf)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := FromJSON("qwen3-as.gguf", js, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	bad := 0
	for _, g := range readEncodeGoldens(t, "qwen3") {
		if got := tk.Encode(g.Text, false); !slices.Equal(got, g.IDs) {
			if bad++; bad <= 5 {
				t.Errorf("%s[%d] Encode(%q):\n got %v\nwant %v", g.Set, g.I, clip(g.Text, 60), got, g.IDs)
			}
		}
	}
	var decs []decodeGolden
	readJSON(t, "decode_qwen3.json", &decs)
	for i, g := range decs {
		if got := tk.Encode(g.Text, false); !slices.Equal(got, g.IDs) {
			t.Errorf("decode golden [%d] Encode(%q) = %v, want %v", i, g.Text, got, g.IDs)
		}
		if got := tk.Decode(g.IDs, true); got != g.DecodedSkip {
			t.Errorf("decode golden [%d] Decode(skip) = %q, want %q", i, got, g.DecodedSkip)
		}
	}
	if tk.EOS() != 151645 || tk.Pad() != 151643 {
		t.Errorf("eos %d pad %d", tk.EOS(), tk.Pad())
	}
}
