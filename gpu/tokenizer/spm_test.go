package tokenizer

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/gguf"
)

// gemma3Path is the Gemma 3 270M GGUF: $RLHOST_GEMMA3 or models/ at the repository root.
func gemma3Path(t testing.TB) string {
	p := os.Getenv("RLHOST_GEMMA3")
	if p == "" {
		p = filepath.Join("..", "..", "models", "gemma-3-270m-q4_k_m.gguf")
	}
	needAsset(t, p, "model-gemma3")
	return p
}

// TestGemma3LlamaCpp compares the SentencePiece tokenizer built from Gemma 3's GGUF
// vocabulary with llama.cpp's own (goldens by scripts/goldens/tokenizer/gemma3_llamacpp.py):
// every GSM8K test question and answer and a torture set of whitespace runs, Unicode,
// characters that fall back to byte tokens, NUL bytes, and special and user-defined tokens
// in text. Encoding must give llama.cpp's ids with and without BOS, and decoding the ids must
// give llama.cpp's detokenisation of them, which is the text but for a literal "▁" (it
// decodes as a space in both).
func TestGemma3LlamaCpp(t *testing.T) {
	tk := load(t, gemma3Path(t))
	goldens := readEncodeGoldens(t, "gemma3")
	if len(goldens) < 2*1319+80 {
		t.Fatalf("only %d golden records", len(goldens))
	}
	if tk.BOS() != 2 || tk.EOS() != 1 || tk.Pad() != 0 || tk.Unk() != 3 || tk.VocabSize() != 262144 {
		t.Errorf("bos %d eos %d pad %d unk %d vocab %d, want 2 1 0 3 262144", tk.BOS(), tk.EOS(), tk.Pad(), tk.Unk(), tk.VocabSize())
	}
	bad := 0
	report := func(format string, args ...any) {
		if bad++; bad <= 8 {
			t.Errorf(format, args...)
		}
	}
	for _, g := range goldens {
		got := tk.Encode(g.Text, false)
		if !slices.Equal(got, g.IDs) {
			report("%s[%d] Encode(%q):\n got %v\nwant %v", g.Set, g.I, clip(g.Text, 60), got, g.IDs)
		}
		if g.IDsSpecial != nil {
			if got := tk.Encode(g.Text, true); !slices.Equal(got, g.IDsSpecial) {
				report("%s[%d] Encode(%q, addSpecial):\n got %v\nwant %v", g.Set, g.I, clip(g.Text, 60), got, g.IDsSpecial)
			}
		}
		// Round trip: but for a literal "▁", which decodes as a space.
		if dec := tk.Decode(g.IDs, false); dec != g.Text && !strings.Contains(g.Text, "▁") {
			report("%s[%d] Decode(Encode(%q)) = %q", g.Set, g.I, clip(g.Text, 60), clip(dec, 60))
		}
		if g.Decoded != nil {
			if dec := tk.Decode(g.IDs, false); dec != *g.Decoded {
				report("%s[%d] Decode = %q, llama.cpp detokenises to %q", g.Set, g.I, clip(dec, 60), clip(*g.Decoded, 60))
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d records differ from llama.cpp", bad, len(goldens))
	}
	// Special tokens are dropped by skipSpecial, user-defined ones kept.
	ids := tk.Encode("<start_of_turn>user\n<b>hi</b><end_of_turn>", false)
	if got := tk.Decode(ids, true); got != "user\n<b>hi</b>" {
		t.Errorf("Decode(skipSpecial) = %q", got)
	}
}

// TestTinySPMLlamaCpp: the 384-piece SentencePiece vocabulary (byte fallback, llama.cpp's
// default space prefix) of gpu/weights/testdata/llama3.gguf against llama.cpp on the torture
// set (encode_tiny-spm.jsonl.gz, scripts/goldens/tokenizer/spm_llamacpp.py): the path Gemma 3's
// file does not take (a prefix before each piece of text, removed again by decoding), and most
// characters falling back to bytes.
func TestTinySPMLlamaCpp(t *testing.T) {
	tk, err := Load(filepath.Join("..", "weights", "testdata", "llama3.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	goldens := readEncodeGoldens(t, "tiny-spm")
	if len(goldens) < 80 {
		t.Fatalf("only %d golden records", len(goldens))
	}
	bad := 0
	for _, g := range goldens {
		if got := tk.Encode(g.Text, false); !slices.Equal(got, g.IDs) {
			bad++
			t.Errorf("[%d] Encode(%q):\n got %v\nwant %v", g.I, clip(g.Text, 60), got, g.IDs)
		}
		if got := tk.Encode(g.Text, true); !slices.Equal(got, g.IDsSpecial) {
			bad++
			t.Errorf("[%d] Encode(%q, addSpecial):\n got %v\nwant %v", g.I, clip(g.Text, 60), got, g.IDsSpecial)
		}
		if dec := tk.Decode(g.IDs, false); g.Decoded == nil || dec != *g.Decoded {
			bad++
			t.Errorf("[%d] Decode = %q, llama.cpp detokenises to %v", g.I, clip(dec, 60), g.Decoded)
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d records differ from llama.cpp", bad, len(goldens))
	}
}

// Float32s appends an array of float32 metadata.
func (b *ggufBuilder) Float32s(key string, vals ...float32) *ggufBuilder {
	b.str(&b.kvs, key)
	binary.Write(&b.kvs, binary.LittleEndian, uint32(9))
	binary.Write(&b.kvs, binary.LittleEndian, uint32(6))
	binary.Write(&b.kvs, binary.LittleEndian, uint64(len(vals)))
	for _, v := range vals {
		binary.Write(&b.kvs, binary.LittleEndian, math.Float32bits(v))
	}
	b.n++
	return b
}

// Bool appends a bool.
func (b *ggufBuilder) Bool(key string, v bool) *ggufBuilder {
	b.str(&b.kvs, key)
	binary.Write(&b.kvs, binary.LittleEndian, uint32(7))
	if v {
		b.kvs.WriteByte(1)
	} else {
		b.kvs.WriteByte(0)
	}
	b.n++
	return b
}

// tinySPM is a SentencePiece vocabulary built to tell merge orders apart: "abc" can split
// as "ab"+"c" or "a"+"bc"; "bc" scores higher, so "abc" must become [a, bc], where merging
// the leftmost pair first would give [ab, c]. "é" is no token: it falls back to its bytes.
func tinySPM() *ggufBuilder {
	tokens := []string{"<unk>", "<s>", "</s>", "<0xC3>", "<0xA9>", "▁", "a", "b", "c", "ab", "bc", "▁a", "<ctl>", "xy", "x", "y"}
	scores := []float32{0, 0, 0, 0, 0, -1, -2, -3, -4, -20, -10, -5, 0, -30, -6, -7}
	types := []int32{2, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1, 1, 3, 4, 1, 1}
	return new(ggufBuilder).
		String("tokenizer.ggml.model", "llama").
		Strings("tokenizer.ggml.tokens", tokens...).
		Float32s("tokenizer.ggml.scores", scores...).
		Int32s("tokenizer.ggml.token_type", types...)
}

func TestTinySPM(t *testing.T) {
	open := func(b *ggufBuilder) *Tokenizer {
		t.Helper()
		f, err := gguf.Parse("spm.gguf", b.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		data, cfg, err := FromGGUF(f)
		if err != nil {
			t.Fatal(err)
		}
		tk, err := FromJSON("spm.gguf", data, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tk.Close() })
		return tk
	}
	// Defaults: add_space_prefix, BOS 1 and EOS 2 and unk 0 (no ids in the file), BOS added.
	tk := open(tinySPM())
	if tk.BOS() != 1 || tk.EOS() != 2 || tk.Unk() != 0 {
		t.Errorf("bos %d eos %d unk %d, want llama.cpp's defaults 1 2 0", tk.BOS(), tk.EOS(), tk.Unk())
	}
	for _, tc := range []struct {
		text    string
		special bool
		want    []int
	}{
		{"abc", false, []int{11, 10}},                  // ▁a (-5) first, then bc (-10)
		{"abc", true, []int{1, 11, 10}},                // with BOS
		{"é", false, []int{5, 3, 4}},                   // byte fallback
		{"a<ctl>abc", false, []int{11, 12, 11, 10}},    // the prefix after a special token too
		{"xy", false, []int{13}},                       // a user-defined token is split out before the model
		{"b xy c", false, []int{5, 7, 5, 13, 5, 5, 8}}, // each piece of text around it gets a prefix
		{"", true, []int{1}},
	} {
		if got := tk.Encode(tc.text, tc.special); !slices.Equal(got, tc.want) {
			t.Errorf("Encode(%q, %v) = %v, want %v", tc.text, tc.special, got, tc.want)
		}
	}
	if got := tk.Decode([]int{1, 5, 6, 10, 5, 3, 4}, true); got != "abc é" {
		t.Errorf("Decode = %q", got)
	}
	// Without the prefix and with EOS: ids from the file, add_eos_token.
	tk = open(tinySPM().Bool("tokenizer.ggml.add_space_prefix", false).Bool("tokenizer.ggml.add_bos_token", false).
		Bool("tokenizer.ggml.add_eos_token", true).Uint32("tokenizer.ggml.eos_token_id", 12))
	// a b c: "bc" (-10) beats "ab" (-20), though "ab" is further left
	if got := tk.Encode("abc", true); !slices.Equal(got, []int{6, 10, 12}) {
		t.Errorf("Encode(abc) without prefix, with eos = %v, want [6 10 12]", got)
	}
	if got := tk.Decode([]int{6, 10, 5, 6}, false); got != "abc a" {
		t.Errorf("Decode = %q", got)
	}
}
