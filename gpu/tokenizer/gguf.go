package tokenizer

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/rlhost/rlhost/gpu/gguf"
)

// GGUF token types (tokenizer.ggml.token_type), as llama.cpp writes them.
const (
	ggufTokenNormal      = 1
	ggufTokenUnknown     = 2
	ggufTokenControl     = 3
	ggufTokenUserDefined = 4
	ggufTokenUnused      = 5
	ggufTokenByte        = 6
)

// Pre-tokenizer regexes, by tokenizer.ggml.pre, as in llama.cpp and the
// models' own tokenizer.json files.
const (
	regexGPT2   = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	regexQwen2  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	regexLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

func loadGGUFFile(path string) (*Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	defer f.Close()
	data, cfg, err := FromGGUF(f)
	if err != nil {
		return nil, err
	}
	return FromJSON(path, data, cfg)
}

// FromGGUF converts the tokenizer.ggml.* metadata of a GGUF file into an
// equivalent tokenizer.json and the tokenizer_config settings (special tokens
// and tokenizer.chat_template).
//
// Supported tokenizer.ggml.model values:
//   - "gpt2" (byte-level BPE) with tokenizer.ggml.pre "smollm" (single digits,
//     then the GPT-2 regex), "qwen2" (Qwen2's regex, NFC normalizer),
//     "llama-bpe" (Llama 3's regex) and "default"/"gpt2" (the GPT-2 regex);
//   - "llama" (SentencePiece vocabularies with scores and byte fallback, as in
//     Llama 2, Mistral and Gemma 3 files): see [spmJSON].
//
// Control and unknown tokens become special added tokens, user-defined tokens
// non-special added tokens, so both are recognised in text before the model
// splits the rest (llama.cpp's tokenize with parse_special).
func FromGGUF(f *gguf.File) ([]byte, Config, error) {
	var cfg Config
	if !f.Has("tokenizer.ggml.model") {
		return nil, cfg, fmt.Errorf("%w: %s: no tokenizer in this GGUF file (metadata key tokenizer.ggml.model is missing)", ErrFormat, f.Name)
	}
	errf := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrFormat, f.Name, fmt.Sprintf(format, args...))
	}
	model, err := f.String("tokenizer.ggml.model")
	if err != nil {
		return nil, cfg, fmt.Errorf("tokenizer: %w", err)
	}
	if model != "gpt2" && model != "llama" {
		return nil, cfg, errf("tokenizer.ggml.model %q is not supported (only \"gpt2\", byte-level BPE, and \"llama\", SentencePiece)", model)
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, cfg, fmt.Errorf("tokenizer: %w", err)
	}
	if len(tokens) == 0 {
		return nil, cfg, errf("tokenizer.ggml.tokens is empty")
	}
	var types []int64
	if f.Has("tokenizer.ggml.token_type") {
		if types, err = f.Ints("tokenizer.ggml.token_type"); err != nil {
			return nil, cfg, fmt.Errorf("tokenizer: %w", err)
		}
		if len(types) != len(tokens) {
			return nil, cfg, errf("tokenizer.ggml.token_type has %d entries for %d tokens", len(types), len(tokens))
		}
	}
	for i, ty := range types {
		if ty < ggufTokenNormal || ty > ggufTokenByte {
			return nil, cfg, errf("tokenizer.ggml.token_type[%d] = %d is not a known token type", i, ty)
		}
	}
	vocab := make(map[string]int, len(tokens))
	for i, t := range tokens {
		if _, dup := vocab[t]; dup && model == "gpt2" {
			// Keep the first id, as the Python converters do; later ids of the
			// same string cannot be produced by encoding anyway. llama.cpp's
			// SentencePiece vocabularies keep the last (token_to_id).
			continue
		}
		vocab[t] = i
	}
	// Added tokens: recognised in text before the model sees it.
	added := []addedToken{}
	for i, ty := range types {
		switch {
		case ty == ggufTokenControl || ty == ggufTokenUserDefined || (ty == ggufTokenUnknown && model == "llama"):
			if vocab[tokens[i]] != i || tokens[i] == "" {
				continue
			}
			added = append(added, addedToken{ID: i, Content: tokens[i], Special: ty != ggufTokenUserDefined})
		}
	}
	var tj map[string]any
	switch model {
	case "gpt2":
		tj, err = bpeJSON(f, vocab, errf)
	case "llama":
		tj, err = spmJSON(f, tokens, types, vocab, &cfg, errf)
	}
	if err != nil {
		return nil, cfg, err
	}
	tj["version"] = "1.0"
	tj["truncation"] = nil
	tj["padding"] = nil
	tj["added_tokens"] = added
	data, err := json.Marshal(tj)
	if err != nil {
		return nil, cfg, fmt.Errorf("tokenizer: %s: %w", f.Name, err)
	}

	tokenAt := func(key string) (string, error) {
		if !f.Has(key) {
			return "", nil
		}
		id, err := f.Uint(key)
		if err != nil {
			return "", fmt.Errorf("tokenizer: %w", err)
		}
		if id >= uint64(len(tokens)) {
			return "", errf("%s = %d is not a token id (vocabulary of %d)", key, id, len(tokens))
		}
		return tokens[id], nil
	}
	for key, dst := range map[string]*string{
		"tokenizer.ggml.bos_token_id":     &cfg.BOS,
		"tokenizer.ggml.eos_token_id":     &cfg.EOS,
		"tokenizer.ggml.padding_token_id": &cfg.Pad,
		"tokenizer.ggml.unknown_token_id": &cfg.Unk,
	} {
		if !f.Has(key) {
			continue // keeps spmJSON's llama.cpp defaults
		}
		if *dst, err = tokenAt(key); err != nil {
			return nil, cfg, err
		}
	}
	if f.Has("tokenizer.chat_template") {
		if cfg.ChatTemplate, err = f.String("tokenizer.chat_template"); err != nil {
			return nil, cfg, fmt.Errorf("tokenizer: %w", err)
		}
	}
	return data, cfg, nil
}

type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// bpeJSON is the tokenizer.json (less its added tokens) of a "gpt2" vocabulary.
func bpeJSON(f *gguf.File, vocab map[string]int, errf func(string, ...any) error) (map[string]any, error) {
	pre := "default"
	var err error
	if f.Has("tokenizer.ggml.pre") {
		if pre, err = f.String("tokenizer.ggml.pre"); err != nil {
			return nil, fmt.Errorf("tokenizer: %w", err)
		}
	}
	mergeStrs, err := f.Strings("tokenizer.ggml.merges")
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	merges := make([][2]string, len(mergeStrs))
	for i, m := range mergeStrs {
		a, b, ok := strings.Cut(m, " ")
		if !ok || a == "" || b == "" {
			return nil, errf("tokenizer.ggml.merges[%d] = %q is not two tokens separated by a space", i, m)
		}
		if _, ok := vocab[a]; !ok {
			return nil, errf("tokenizer.ggml.merges[%d] = %q: %q is not a token", i, m, a)
		}
		if _, ok := vocab[b]; !ok {
			return nil, errf("tokenizer.ggml.merges[%d] = %q: %q is not a token", i, m, b)
		}
		if _, ok := vocab[a+b]; !ok {
			return nil, errf("tokenizer.ggml.merges[%d] = %q: the merged token %q is not a token", i, m, a+b)
		}
		merges[i] = [2]string{a, b}
	}

	var normalizer, preTok any
	byteLevelNoRegex := map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}
	switch pre {
	case "smollm":
		preTok = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Digits", "individual_digits": true},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		}}
	case "default", "gpt2":
		preTok = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	case "qwen2":
		normalizer = map[string]any{"type": "NFC"}
		preTok = splitThenBytes(regexQwen2, byteLevelNoRegex)
	case "llama-bpe", "llama3":
		preTok = splitThenBytes(regexLlama3, byteLevelNoRegex)
	default:
		return nil, errf("tokenizer.ggml.pre %q is not supported (known: smollm, qwen2, llama-bpe, gpt2, default)", pre)
	}
	return map[string]any{
		"normalizer":     normalizer,
		"pre_tokenizer":  preTok,
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": nil,
			"continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
			"vocab": vocab, "merges": merges,
		},
	}, nil
}

// spmJSON is the tokenizer.json (less its added tokens) of a SentencePiece
// ("llama") vocabulary that encodes as llama.cpp's SPM tokenizer does
// (llm_tokenizer_spm_session in llama-vocab.cpp):
//
//   - spaces become U+2581 ("▁"), and with tokenizer.ggml.add_space_prefix
//     (default true; Gemma 3 files set false) each piece of text between added
//     tokens gets one in front;
//   - the text's characters are merged pairwise, always the adjacent pair
//     whose concatenation is the token of highest tokenizer.ggml.scores, the
//     leftmost among equals, until no pair forms a token;
//   - a character that is no token becomes its UTF-8 bytes' <0xXX> tokens.
//
// The merging is Hugging Face's BPE model with byte_fallback, its merge list
// holding every split of each token (but added ones) into two tokens, ranked
// by the token's score: BPE applies the lowest-ranked pair present, leftmost
// first, which is the pair of highest score. (Hugging Face's own converter
// builds Gemma's and Llama 2's tokenizer.json the same way.) Encode with
// addSpecial prepends BOS (tokenizer.ggml.add_bos_token, default true) and
// appends EOS (add_eos_token, default false) as llama.cpp's add_special does.
// Where the file names no bos/eos/unknown id, llama.cpp's defaults 1, 2 and
// 0 are used. Decoding maps ▁ back to spaces, byte tokens to bytes, and drops
// the one leading space add_space_prefix added.
// maxSPMMergeWork bounds the work of deriving a SentencePiece vocabulary's merges, so that a
// hostile file of long tokens cannot make loading take hours.
const maxSPMMergeWork = 1 << 30

func spmJSON(f *gguf.File, tokens []string, types []int64, vocab map[string]int, cfg *Config, errf func(string, ...any) error) (map[string]any, error) {
	scores, err := f.Floats("tokenizer.ggml.scores")
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if len(scores) != len(tokens) {
		return nil, errf("tokenizer.ggml.scores has %d entries for %d tokens", len(scores), len(tokens))
	}
	for i, sc := range scores {
		if math.IsNaN(sc) {
			return nil, errf("tokenizer.ggml.scores[%d] is NaN", i)
		}
	}
	flag := func(key string, def bool) (bool, error) {
		if !f.Has(key) {
			return def, nil
		}
		v, err := f.Bool(key)
		if err != nil {
			return false, fmt.Errorf("tokenizer: %w", err)
		}
		return v, nil
	}
	addPrefix, err := flag("tokenizer.ggml.add_space_prefix", true)
	if err != nil {
		return nil, err
	}
	addBOS, err := flag("tokenizer.ggml.add_bos_token", true)
	if err != nil {
		return nil, err
	}
	addEOS, err := flag("tokenizer.ggml.add_eos_token", false)
	if err != nil {
		return nil, err
	}
	if ws, err := flag("tokenizer.ggml.remove_extra_whitespaces", false); err != nil {
		return nil, err
	} else if ws {
		return nil, errf("tokenizer.ggml.remove_extra_whitespaces = true is not supported")
	}
	idOf := func(key string, def int) (int, error) {
		if !f.Has(key) {
			if def < len(tokens) {
				return def, nil
			}
			return -1, nil
		}
		id, err := f.Uint(key)
		if err != nil {
			return -1, fmt.Errorf("tokenizer: %w", err)
		}
		if id >= uint64(len(tokens)) {
			return -1, errf("%s = %d is not a token id (vocabulary of %d)", key, id, len(tokens))
		}
		return int(id), nil
	}
	bos, err := idOf("tokenizer.ggml.bos_token_id", 1)
	if err != nil {
		return nil, err
	}
	eos, err := idOf("tokenizer.ggml.eos_token_id", 2)
	if err != nil {
		return nil, err
	}
	unk, err := idOf("tokenizer.ggml.unknown_token_id", 0)
	if err != nil {
		return nil, err
	}
	for _, p := range []struct {
		id  int
		dst *string
	}{{bos, &cfg.BOS}, {eos, &cfg.EOS}, {unk, &cfg.Unk}} {
		if p.id >= 0 {
			*p.dst = tokens[p.id]
		}
	}

	// Merge targets: every token llama.cpp's text_to_token can give a pair
	// (added tokens never reach the model: their text is split out first),
	// by descending score, then id.
	var targets []int
	work := 0 // bytes hashed to look up the halves of every split: sum of len^2
	for i, t := range tokens {
		if vocab[t] != i || len(t) <= 1 {
			continue
		}
		if work += len(t) * len(t); work > maxSPMMergeWork {
			return nil, errf("tokenizer.ggml.tokens: the tokens are too long to derive merges from (sum of squared lengths beyond %d; Gemma 3's 262,144 tokens need 26.5 million)", maxSPMMergeWork)
		}
		if types != nil {
			if ty := types[i]; ty == ggufTokenControl || ty == ggufTokenUserDefined || ty == ggufTokenUnknown {
				continue
			}
		}
		targets = append(targets, i)
	}
	sort.SliceStable(targets, func(a, b int) bool { return scores[targets[a]] > scores[targets[b]] })
	merges := make([][2]string, 0, 2*len(targets))
	for _, id := range targets {
		t := tokens[id]
		for k := range t {
			if k == 0 {
				continue
			}
			a, b := t[:k], t[k:]
			if _, ok := vocab[a]; !ok {
				continue
			}
			if _, ok := vocab[b]; !ok {
				continue
			}
			merges = append(merges, [2]string{a, b})
		}
	}

	var normalizer any = map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"}
	decoders := []any{
		map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
		map[string]any{"type": "ByteFallback"},
		map[string]any{"type": "Fuse"},
	}
	cfg.spm = &spmPipeline{stripPrefix: addPrefix}
	if addPrefix {
		normalizer = map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			normalizer,
		}}
		decoders = append(decoders, map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0})
	}
	var post any
	var single []any
	special := map[string]any{}
	addSpecial := func(id int) {
		single = append(single, map[string]any{"SpecialToken": map[string]any{"id": tokens[id], "type_id": 0}})
		special[tokens[id]] = map[string]any{"id": tokens[id], "ids": []int{id}, "tokens": []string{tokens[id]}}
	}
	if addBOS && bos >= 0 {
		addSpecial(bos)
	}
	single = append(single, map[string]any{"Sequence": map[string]any{"id": "A", "type_id": 0}})
	if addEOS && eos >= 0 {
		addSpecial(eos)
	}
	if len(special) > 0 {
		post = map[string]any{"type": "TemplateProcessing", "single": single, "pair": single, "special_tokens": special}
	}
	var unkTok any
	if unk >= 0 {
		unkTok = tokens[unk]
	}
	return map[string]any{
		"normalizer":     normalizer,
		"pre_tokenizer":  nil,
		"post_processor": post,
		"decoder":        map[string]any{"type": "Sequence", "decoders": decoders},
		"model": map[string]any{
			"type": "BPE", "dropout": nil, "unk_token": unkTok,
			"continuing_subword_prefix": nil, "end_of_word_suffix": nil,
			"fuse_unk": true, "byte_fallback": true, "ignore_merges": false,
			"vocab": vocab, "merges": merges,
		},
	}, nil
}

func splitThenBytes(regex string, byteLevel any) any {
	return map[string]any{"type": "Sequence", "pretokenizers": []any{
		map[string]any{"type": "Split", "pattern": map[string]any{"Regex": regex}, "behavior": "Isolated", "invert": false},
		byteLevel,
	}}
}
