package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	hf "github.com/daulet/tokenizers"
)

// ErrFormat is wrapped by errors about malformed tokenizer files.
var ErrFormat = errors.New("tokenizer: malformed input")

// SpecialToken is an added token of the vocabulary (tokenizer.json's
// added_tokens). Special ones are dropped by Decode with skipSpecial.
type SpecialToken struct {
	ID      int
	Content string
	Special bool
}

// Tokenizer encodes and decodes text for one model and renders its chat template.
// It is safe for concurrent use. Close releases the Rust tokenizer.
type Tokenizer struct {
	name string // where it was loaded from, for error messages
	tk   *hf.Tokenizer

	vocabSize int
	added     []SpecialToken // by id
	byContent map[string]int // added tokens and vocabulary: content -> id
	byteLevel bool           // the decoder is ByteLevel (GPT-2 style bytes -> runes)
	// soleByteTokens: bytes 0x00 and 0x01 each occur in exactly one token of
	// the vocabulary (byte-level), so no merge involves them.
	soleByteTokens bool
	vocab          []string // id -> token string (vocabulary and added tokens)
	spm            *spm     // a SentencePiece vocabulary from a GGUF file (spm.go), else nil

	bos, eos, pad, unk int // -1 when the model has none
	bosText, eosText   string
	chatTemplate       string
	templateOrigin     string // where a chat template set by SetChatTemplate came from; "": the model's

	tmplOnce sync.Once
	tmpl     *chatTemplate
	tmplErr  error

	obsOnce   sync.Once
	obsPrefix string
	obsErr    error
}

// Load reads a tokenizer from path: a Hugging Face model directory, a
// tokenizer.json file, or a .gguf model file.
func Load(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.IsDir() {
		return loadDir(path)
	}
	if isGGUF(path) {
		return loadGGUFFile(path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	return FromJSON(path, data, Config{})
}

func isGGUF(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	n, _ := f.Read(magic[:])
	return n == 4 && string(magic[:]) == "GGUF"
}

func loadDir(dir string) (*Tokenizer, error) {
	tjPath := filepath.Join(dir, "tokenizer.json")
	data, err := os.ReadFile(tjPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("tokenizer: %s: no tokenizer.json in the model directory", dir)
		}
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	cfg, err := readConfigDir(dir)
	if err != nil {
		return nil, err
	}
	return FromJSON(tjPath, data, cfg)
}

// tokenizerJSON is the part of tokenizer.json this package reads itself.
type tokenizerJSON struct {
	AddedTokens []struct {
		ID      *int   `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Decoder *struct {
		Type     string            `json:"type"`
		Decoders []json.RawMessage `json:"decoders"`
	} `json:"decoder"`
	Model *struct {
		Type  string         `json:"type"`
		Vocab map[string]int `json:"vocab"`
	} `json:"model"`
}

// FromJSON builds a tokenizer from the bytes of a tokenizer.json and the
// settings of its tokenizer_config.json; name is used in error messages.
func FromJSON(name string, data []byte, cfg Config) (*Tokenizer, error) {
	var tj tokenizerJSON
	if err := json.Unmarshal(data, &tj); err != nil {
		return nil, fmt.Errorf("%w: %s: not a valid tokenizer.json: %v", ErrFormat, name, err)
	}
	if tj.Model == nil {
		return nil, fmt.Errorf("%w: %s: tokenizer.json has no \"model\"", ErrFormat, name)
	}
	t := &Tokenizer{name: name, byContent: map[string]int{}, bos: -1, eos: -1, pad: -1, unk: -1}
	maxID := -1
	for tok, id := range tj.Model.Vocab {
		if id < 0 {
			return nil, fmt.Errorf("%w: %s: model.vocab[%q] has negative id %d", ErrFormat, name, tok, id)
		}
		t.byContent[tok] = id
		maxID = max(maxID, id)
	}
	for i, a := range tj.AddedTokens {
		if a.ID == nil || *a.ID < 0 {
			return nil, fmt.Errorf("%w: %s: added_tokens[%d] (%q) has no valid id", ErrFormat, name, i, a.Content)
		}
		t.added = append(t.added, SpecialToken{ID: *a.ID, Content: a.Content, Special: a.Special})
		t.byContent[a.Content] = *a.ID
		maxID = max(maxID, *a.ID)
	}
	sort.Slice(t.added, func(i, j int) bool { return t.added[i].ID < t.added[j].ID })
	if maxID > 1<<24 {
		return nil, fmt.Errorf("%w: %s: token id %d is out of range", ErrFormat, name, maxID)
	}
	t.vocab = make([]string, maxID+1)
	for tok, id := range t.byContent {
		t.vocab[id] = tok
	}
	if d := tj.Decoder; d != nil {
		t.byteLevel = d.Type == "ByteLevel"
		if d.Type == "Sequence" {
			for _, sub := range d.Decoders {
				var s struct{ Type string }
				if json.Unmarshal(sub, &s) == nil && s.Type == "ByteLevel" {
					t.byteLevel = true
				}
			}
		}
	}

	if t.byteLevel {
		n0, n1 := 0, 0
		for tok := range t.byContent {
			n0 += strings.Count(tok, string(byteToRune[0]))
			n1 += strings.Count(tok, string(byteToRune[1]))
		}
		t.soleByteTokens = n0 == 1 && n1 == 1
	}

	if cfg.spm != nil {
		t.spm = newSPM(t, *cfg.spm)
	}

	tk, err := hf.FromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrFormat, name, err)
	}
	t.tk = tk
	t.vocabSize = int(tk.VocabSize())

	if err := t.applyConfig(cfg); err != nil {
		tk.Close()
		return nil, err
	}
	return t, nil
}

func (t *Tokenizer) applyConfig(cfg Config) error {
	lookup := func(key, tok string) (int, error) {
		if tok == "" {
			return -1, nil
		}
		id, ok := t.byContent[tok]
		if !ok {
			return -1, fmt.Errorf("%w: %s: %s %q is not in the vocabulary", ErrFormat, t.name, key, tok)
		}
		return id, nil
	}
	var err error
	if t.bos, err = lookup("bos_token", cfg.BOS); err != nil {
		return err
	}
	if t.eos, err = lookup("eos_token", cfg.EOS); err != nil {
		return err
	}
	if t.pad, err = lookup("pad_token", cfg.Pad); err != nil {
		return err
	}
	if t.unk, err = lookup("unk_token", cfg.Unk); err != nil {
		return err
	}
	t.bosText, t.eosText = cfg.BOS, cfg.EOS
	t.chatTemplate = cfg.ChatTemplate
	return nil
}

// Close releases the Rust tokenizer. The Tokenizer must not be used afterwards.
func (t *Tokenizer) Close() error {
	if t.tk == nil {
		return nil
	}
	err := t.tk.Close()
	t.tk = nil
	return err
}

// Name is where the tokenizer was loaded from.
func (t *Tokenizer) Name() string { return t.name }

// VocabSize is the number of ids, added tokens included.
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// EOS is the end-of-sequence id (tokenizer_config eos_token), or -1.
func (t *Tokenizer) EOS() int { return t.eos }

// BOS is the beginning-of-sequence id (tokenizer_config bos_token), or -1.
func (t *Tokenizer) BOS() int { return t.bos }

// Pad is the padding id (tokenizer_config pad_token), or -1.
func (t *Tokenizer) Pad() int { return t.pad }

// Unk is the unknown-token id (tokenizer_config unk_token), or -1.
func (t *Tokenizer) Unk() int { return t.unk }

// ChatTemplate is the model's Jinja chat template source ("" if it has none).
func (t *Tokenizer) ChatTemplate() string { return t.chatTemplate }

// SpecialTokens lists the added tokens (tokenizer.json added_tokens) by id;
// Special tells which ones Decode drops with skipSpecial.
func (t *Tokenizer) SpecialTokens() []SpecialToken {
	return append([]SpecialToken(nil), t.added...)
}

// TokenID returns the id of a token string of the vocabulary or added tokens.
func (t *Tokenizer) TokenID(tok string) (int, bool) {
	id, ok := t.byContent[tok]
	return id, ok
}

// Encode returns the token ids of text. addSpecial adds what the
// tokenizer's post-processor adds (e.g. a BOS token); special tokens written in
// text (e.g. "<|im_end|>") are always recognised, as in Python tokenizers.
//
// The text goes to the Rust library as a C string: invalid UTF-8 is replaced
// by U+FFFD (Python strings cannot hold it), and NUL bytes, which would end
// the string, are handled as described at encodeNUL.
func (t *Tokenizer) Encode(text string, addSpecial bool) []int {
	if strings.IndexByte(text, 0) < 0 {
		return t.encode(text, addSpecial)
	}
	return t.encodeNUL(text, addSpecial)
}

// encodeNUL encodes text holding NUL bytes. In a byte-level vocabulary where
// the bytes 0x00 and 0x01 each appear in exactly one token (their own: no
// merge ever involves them), both are control characters that every
// pre-tokenizer regex treats alike, so NUL is written as 0x01, and the
// resulting 0x01 tokens that stand for a NUL get the NUL id back: exact.
// Otherwise the text is encoded piecewise around each NUL, which can differ
// from Python where a whitespace run touches the NUL.
func (t *Tokenizer) encodeNUL(text string, addSpecial bool) []int {
	if ids, ok := t.encodeNULSPM(text, addSpecial); ok {
		return ids
	}
	nul, nulOK := t.nulID()
	if soh, ok := t.sohID(); ok && nulOK && t.soleByteTokens {
		ids := t.encode(strings.ReplaceAll(text, "\x00", "\x01"), addSpecial)
		// The k-th 0x01 token is the k-th 0x00 or 0x01 byte of text.
		var wasNUL []bool
		for i := 0; i < len(text); i++ {
			if text[i] <= 1 {
				wasNUL = append(wasNUL, text[i] == 0)
			}
		}
		k := 0
		for i, id := range ids {
			if id == soh {
				if k < len(wasNUL) && wasNUL[k] {
					ids[i] = nul
				}
				k++
			}
		}
		if k == len(wasNUL) {
			return ids
		}
		// An added token swallowed a 0x01: fall through to the piecewise way.
	}
	var out []int
	for i, part := range strings.Split(text, "\x00") {
		if i > 0 && nulOK {
			out = append(out, nul)
		}
		out = append(out, t.encode(part, false)...)
	}
	if addSpecial {
		if pre := t.encode("", true); len(pre) > 0 {
			out = append(append([]int(nil), pre...), out...)
		}
	}
	return out
}

func (t *Tokenizer) encode(text string, addSpecial bool) []int {
	// Ids only: asking for the token strings too costs a C string per token.
	ids := t.tk.EncodeWithOptions(text, addSpecial).IDs
	out := make([]int, len(ids))
	for i, id := range ids {
		out[i] = int(id)
	}
	return out
}

// sohID is the id of the token for the single byte 0x01.
func (t *Tokenizer) sohID() (int, bool) {
	if !t.byteLevel {
		return 0, false
	}
	id, ok := t.byContent[string(byteToRune[1])]
	return id, ok
}

// nulID is the id of the token for the single byte 0.
func (t *Tokenizer) nulID() (int, bool) {
	if t.byteLevel {
		if id, ok := t.byContent[string(byteToRune[0])]; ok {
			return id, true
		}
	}
	id, ok := t.byContent["<0x00>"]
	return id, ok
}

// Decode returns the text of ids. skipSpecial drops special added tokens, as
// Python's decode(skip_special_tokens=True) does. Ids outside the vocabulary
// are ignored, as the Rust library does.
func (t *Tokenizer) Decode(ids []int, skipSpecial bool) string {
	if len(ids) == 0 {
		return ""
	}
	u := make([]uint32, 0, len(ids))
	for _, id := range ids {
		if id >= 0 && id <= 1<<31 {
			u = append(u, uint32(id))
		}
	}
	s := t.tk.Decode(u, skipSpecial)
	if s == "" && t.byteLevel && t.hasNUL(u) {
		// The library returns no text at all when the result holds a NUL byte
		// (it hands back a C string); rebuild it in Go from the byte-level vocabulary.
		return t.decodeByteLevel(u, skipSpecial)
	}
	if s == "" && t.spm != nil && slices.Contains(u, uint32(t.spm.nul)) {
		return t.decodeSPM(u, skipSpecial) // the same, for a SentencePiece vocabulary
	}
	return s
}

func (t *Tokenizer) hasNUL(ids []uint32) bool {
	nul := string(byteToRune[0])
	for _, id := range ids {
		if int(id) < len(t.vocab) && strings.Contains(t.vocab[id], nul) {
			return true
		}
	}
	return false
}

// decodeByteLevel decodes ids as Rust tokenizers does for a ByteLevel
// decoder: each token (added tokens by their content) maps rune by rune back to
// bytes, or gives its own UTF-8 bytes if some rune is outside the byte map; the
// bytes become text with invalid sequences replaced as Rust's
// String::from_utf8_lossy does.
func (t *Tokenizer) decodeByteLevel(ids []uint32, skipSpecial bool) string {
	special := map[int]bool{}
	for _, a := range t.added {
		special[a.ID] = a.Special
	}
	var buf bytes.Buffer
	var tok []byte
	for _, u := range ids {
		id := int(u)
		if id >= len(t.vocab) || t.vocab[id] == "" || (skipSpecial && special[id]) {
			continue
		}
		tok = tok[:0]
		mapped := true
		for _, r := range t.vocab[id] {
			b, ok := runeToByte[r]
			if !ok {
				mapped = false
				break
			}
			tok = append(tok, b)
		}
		if mapped {
			buf.Write(tok)
		} else {
			buf.WriteString(t.vocab[id])
		}
	}
	return utf8Lossy(buf.Bytes())
}
