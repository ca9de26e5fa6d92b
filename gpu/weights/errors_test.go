package weights

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/gguf"
	"github.com/rlhost/rlhost/gpu/safetensors"
)

// copyDir copies a flat testdata directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	os.MkdirAll(dst, 0o755)
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644)
	}
	return dst
}

// patchFile copies a testdata file and replaces the first occurrence of old (after the first
// occurrence of after, if given) with new of the same length.
func patchFile(t *testing.T, src, after, old, new string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	start := 0
	if after != "" {
		start = bytes.Index(b, []byte(after))
		if start < 0 {
			t.Fatalf("%q not in %s", after, src)
		}
	}
	i := bytes.Index(b[start:], []byte(old))
	if i < 0 || len(old) != len(new) {
		t.Fatalf("cannot patch %q in %s", old, src)
	}
	copy(b[start+i:], new)
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	os.WriteFile(dst, b, 0o644)
	return dst
}

func editConfig(t *testing.T, dir, old, new string) {
	t.Helper()
	p := filepath.Join(dir, "config.json")
	b, _ := os.ReadFile(p)
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%q not in %s", old, p)
	}
	os.WriteFile(p, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644)
}

// ggufTensorType patches the ggml type of the named tensor's info.
func ggufTensorType(t *testing.T, src, tensor string, typ uint32) string {
	t.Helper()
	b, _ := os.ReadFile(src)
	name := binary.LittleEndian.AppendUint64(nil, uint64(len(tensor)))
	name = append(name, tensor...)
	i := bytes.Index(b, name)
	if i < 0 {
		t.Fatalf("no tensor info %s", tensor)
	}
	p := i + len(name)
	nd := int(binary.LittleEndian.Uint32(b[p:]))
	binary.LittleEndian.PutUint32(b[p+4+8*nd:], typ)
	dst := filepath.Join(t.TempDir(), filepath.Base(src))
	os.WriteFile(dst, b, 0o644)
	return dst
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		path func(t *testing.T) string
		want []string // all must appear in the error
	}{
		{"absent", func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") }, []string{"nope"}},
		{"not a checkpoint", func(t *testing.T) string { return "weights_test.go" }, []string{"weights_test.go", "not a checkpoint"}},
		{"no config", func(t *testing.T) string {
			d := copyDir(t, "testdata/llama")
			os.Remove(filepath.Join(d, "config.json"))
			return d
		}, []string{"config.json"}},
		{"bad config json", func(t *testing.T) string {
			d := copyDir(t, "testdata/llama")
			os.WriteFile(filepath.Join(d, "config.json"), []byte("{"), 0o644)
			return d
		}, []string{"config.json"}},
		{"bad generation_config json", func(t *testing.T) string {
			d := copyDir(t, "testdata/llama")
			os.WriteFile(filepath.Join(d, GenerationConfigFile), []byte(`{"eos_token_id": 2`), 0o644)
			return d
		}, []string{"/llama/generation_config.json", "unexpected end of JSON input"}},
		{"bad generation_config eos", func(t *testing.T) string {
			d := copyDir(t, "testdata/llama")
			os.WriteFile(filepath.Join(d, GenerationConfigFile), []byte(`{"eos_token_id": [2, "</s>"]}`), 0o644)
			return d
		}, []string{"/llama/generation_config.json: eos_token_id: want an id or a list of ids"}},
		{"negative eos", func(t *testing.T) string {
			d := copyDir(t, "testdata/llama")
			editConfig(t, d, `"eos_token_id": 2`, `"eos_token_id": [2, -1]`)
			return d
		}, []string{"/llama/config.json: eos_token_id: -1 is not a token id"}},
		{"unsupported architecture", func(t *testing.T) string {
			d := copyDir(t, "testdata/llama")
			editConfig(t, d, `"model_type": "llama"`, `"model_type": "gpt2"`)
			return d
		}, []string{"config.json", "unsupported architecture", "gpt2"}},
		{"unsupported rope type", func(t *testing.T) string {
			d := copyDir(t, "testdata/llama")
			editConfig(t, d, `"rope_type": "default"`, `"rope_type": "dynamic"`)
			return d
		}, []string{"config.json", "rope_parameters.rope_type", "dynamic", "not supported", "llama3"}},
		{"llama3 rope without its parameters", func(t *testing.T) string {
			d := copyDir(t, "testdata/llama")
			editConfig(t, d, `"rope_type": "default"`, `"rope_type": "llama3", "factor": 8`)
			return d
		}, []string{"config.json", "rope_parameters", "llama3 needs", "low_freq_factor"}},
		{"gemma2", func(t *testing.T) string {
			d := copyDir(t, "testdata/llama")
			editConfig(t, d, `"model_type": "llama"`, `"model_type": "gemma2"`)
			return d
		}, []string{"config.json", `model_type "gemma2"`, "nearest: gemma3_text"}},
		{"layer types", func(t *testing.T) string {
			d := copyDir(t, "testdata/llama")
			editConfig(t, d, `"model_type": "llama"`, `"layer_types": ["full_attention", "chunked_attention"], "model_type": "llama"`)
			return d
		}, []string{"config.json", `layer_types[1] = "chunked_attention"`}},
		{"shape mismatch", func(t *testing.T) string {
			d := copyDir(t, "testdata/llama")
			editConfig(t, d, `"intermediate_size": 128`, `"intermediate_size": 96`)
			return d
		}, []string{"/llama: tensor model.layers.0.mlp.down_proj.weight has shape [64 128], want [64 96]"}},
		{"missing tensor", func(t *testing.T) string {
			d := copyDir(t, "testdata/llama")
			editConfig(t, d, `"num_hidden_layers": 2`, `"num_hidden_layers": 3`)
			return d
		}, []string{"tensor model.layers.2.", "is missing"}},
		{"unexpected tensor", func(t *testing.T) string {
			d := copyDir(t, "testdata/llama")
			editConfig(t, d, `"num_hidden_layers": 2`, `"num_hidden_layers": 1`)
			return d
		}, []string{"unexpected tensor model.layers.1."}},
		{"unsupported dtype", func(t *testing.T) string {
			d := t.TempDir()
			b, _ := os.ReadFile("testdata/llama/config.json")
			os.WriteFile(filepath.Join(d, "config.json"), b, 0o644)
			hdr := `{"model.embed_tokens.weight":{"dtype":"I64","shape":[2],"data_offsets":[0,16]}}`
			f := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
			f = append(append(f, hdr...), make([]byte, 16)...)
			os.WriteFile(filepath.Join(d, "model.safetensors"), f, 0o644)
			return d
		}, []string{"model.safetensors", "model.embed_tokens.weight", "unsupported dtype I64"}},
		{"truncated safetensors", func(t *testing.T) string {
			d := copyDir(t, "testdata/qwen2")
			p := filepath.Join(d, "model.safetensors")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)-1000], 0o644)
			return d
		}, []string{"model.safetensors", "truncated"}},
		{"truncated gguf", func(t *testing.T) string {
			b, _ := os.ReadFile("testdata/qwen2.gguf")
			p := filepath.Join(t.TempDir(), "cut.gguf")
			os.WriteFile(p, b[:len(b)-5000], 0o644)
			return p
		}, []string{"cut.gguf", "runs past the end"}},
		{"gguf architecture", func(t *testing.T) string {
			return patchFile(t, "testdata/llama.gguf", "general.architecture", "llama", "gemma")
		}, []string{"llama.gguf", "unsupported architecture", "gemma"}},
		{"gguf unexpected tensor", func(t *testing.T) string {
			return patchFile(t, "testdata/llama.gguf", "", "blk.1.ffn_up.weight", "blk.1.ffn_xx.weight")
		}, []string{"llama.gguf", "unexpected tensor blk.1.ffn_xx.weight"}},
		{"gguf missing key", func(t *testing.T) string {
			return patchFile(t, "testdata/qwen2.gguf", "", "qwen2.block_count", "qwen2.block_coun_")
		}, []string{"qwen2.gguf", "missing metadata key qwen2.block_count"}},
		{"gguf unsupported type", func(t *testing.T) string {
			return ggufTensorType(t, "testdata/qwen2.gguf", "blk.0.ffn_up.weight", 26) // I32: same size as F32
		}, []string{"qwen2.gguf", "tensor blk.0.ffn_up.weight", "cannot dequantise ggml type I32"}},
		{"gguf shape mismatch", func(t *testing.T) string {
			return patchFile(t, "testdata/llama.gguf", "", "llama.feed_forward_length\x04\x00\x00\x00\x80", "llama.feed_forward_length\x04\x00\x00\x00\x60")
		}, []string{"llama.gguf: tensor model.layers.0.mlp.down_proj.weight has shape [64 128], want [64 96]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(tc.path(t))
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err = %v\nwant it to contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "weights: ") {
				t.Errorf("err = %v, want the weights: prefix", err)
			}
		})
	}
}

func TestSaveRejectsBadCheckpoint(t *testing.T) {
	ck := mustLoad(t, "testdata/llama")
	delete(ck.Tensors, "model.norm.weight")
	ck.Source = "in-memory"
	dir := t.TempDir()
	err := Save(dir, ck)
	if err == nil || !strings.Contains(err.Error(), "model.norm.weight is missing") {
		t.Errorf("err = %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, safetensors.SingleFile)); err == nil {
		t.Errorf("a file was written")
	}
}

func FuzzParseConfig(f *testing.F) {
	for _, p := range []string{"testdata/llama/config.json", "testdata/qwen2/config.json"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"model_type":"llama","eos_token_id":[2,3],"rope_scaling":{"type":"linear"}}`))
	base := `{"model_type":"llama","hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":10`
	for _, eos := range []string{`null`, `[]`, `0`, `[128001, 128008, 128009]`, `[5, 5, 3]`, `-1`, `[2, 4294967296]`, `"2"`, `2.5`, `[[2]]`, `{}`} {
		f.Add([]byte(base + `,"eos_token_id":` + eos + `}`))
	}
	f.Add([]byte(`{"model_type":"qwen2","hidden_size":64,"num_attention_heads":0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig("fuzz.json", b)
		if err != nil {
			return
		}
		checkEOS(t, c)
		// A config that parses has sane sizes: ExpectedShapes must not panic or go negative.
		if c.NumHiddenLayers <= 1<<10 {
			for name, s := range ExpectedShapes(c) {
				for _, d := range s {
					if d <= 0 {
						t.Fatalf("%s: shape %v", name, s)
					}
				}
			}
		}
	})
}

// FuzzGenerationConfig: any generation_config.json bytes either fail with an error naming the
// file or add ids to a config's eos ids, keeping its own first and every id once.
func FuzzGenerationConfig(f *testing.F) {
	for _, s := range []string{`{"bos_token_id": 1, "eos_token_id": [128001, 128008, 128009], "temperature": 0.6}`,
		`{"eos_token_id": 151643}`, `{"eos_token_id": null}`, `{"eos_token_id": []}`, `{}`, `{`, `[1]`, `null`,
		`{"eos_token_id": [2, -3]}`, `{"eos_token_id": "</s>"}`, `{"eos_token_id": 1e3}`} {
		f.Add([]byte(s), uint8(2))
	}
	f.Fuzz(func(t *testing.T, b []byte, own uint8) {
		c := Config{}
		c.setEOS([]int{int(own)})
		if own == 0 {
			c.setEOS(nil)
		}
		before := slices.Clone(c.EOSIDs())
		if err := AddGenerationConfig(&c, "generation_config.json", b); err != nil {
			if !strings.HasPrefix(err.Error(), "weights: generation_config.json: ") {
				t.Fatalf("error without the file name: %v", err)
			}
			if !slices.Equal(c.EOSIDs(), before) {
				t.Fatalf("failed, yet the ids changed: %v -> %v", before, c.EOSIDs())
			}
			return
		}
		if ids := c.EOSIDs(); len(ids) < len(before) || !slices.Equal(ids[:len(before)], before) {
			t.Fatalf("ids %v do not start with the config's own %v", ids, before)
		}
		checkEOS(t, c)
	})
}

// checkEOS fails t unless c's eos fields agree: NoEOS exactly when no ids, EOSTokenID the
// first, every id a token id and there once.
func checkEOS(t *testing.T, c Config) {
	t.Helper()
	ids := c.EOSIDs()
	if c.NoEOS != (len(ids) == 0) || (len(ids) > 0 && c.EOSTokenID != ids[0]) || (c.NoEOS && c.EOSTokenID != 0) {
		t.Fatalf("NoEOS %v, EOSTokenID %d, ids %v", c.NoEOS, c.EOSTokenID, ids)
	}
	for i, id := range ids {
		if id < 0 || id > math.MaxInt32 || slices.Contains(ids[:i], id) {
			t.Fatalf("ids %v: %d is not a token id, or repeated", ids, id)
		}
	}
}

func FuzzGGUFCheckpoint(f *testing.F) {
	b, err := os.ReadFile("testdata/micro-q8_0.gguf") // small: large seeds make fuzzing crawl
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		gf, err := gguf.Parse("fuzz.gguf", b)
		if err != nil {
			return
		}
		ck, err := FromGGUF(gf)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "weights: ") {
				t.Fatalf("error without the package prefix: %v", err)
			}
			return
		}
		if err := ck.Check(); err != nil {
			t.Fatalf("loaded checkpoint fails Check: %v", err)
		}
	})
}
