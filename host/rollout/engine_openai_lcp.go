package rollout

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"
	"unicode/utf8"

	"github.com/rlhost/rlhost/gpu/tokenizer"
)

// llama-cpp-python's server (0.3.x) takes prompts as text only and returns each completion
// token as its text piece (llama.cpp's token_to_piece without special tokens, decoded as UTF-8
// with errors="ignore"), with the log-prob of the raw model distribution, the character offset
// of each piece, and the whole completion text. It does not return the end-of-generation
// token. So:
//
//   - the prompt goes as the policy tokenizer's text of the ids, and the engine's own
//     tokenisation of that text (POST /extras/tokenize, the same call its completion uses) must
//     give the ids back exactly, else the request is refused;
//   - the completion ids are the unique split of the completion's bytes into as many
//     vocabulary tokens as there are pieces, each token's bytes decoding (errors ignored) to
//     its piece and starting at its reported offset; no split or two splits is an error;
//   - a completion that ended at an end-of-generation token has no such token (counted in
//     EngineStats.EndTokenMissing; docs/engines.md).
func (e *EnginePolicy) llamaCppPython(ctx context.Context, prompt []int, sp SamplingParams) (Generation, error) {
	tk := e.cfg.Tokenizer
	text := tk.Decode(prompt, false)
	if err := e.checkPrompt(ctx, text, prompt); err != nil {
		return Generation{}, err
	}
	body := map[string]any{"prompt": text, "max_tokens": sp.MaxTokens, "temperature": sp.Temperature,
		"top_p": topP(sp.TopP), "top_k": max(sp.TopK, 0), "min_p": 0, "repeat_penalty": 1,
		"seed": seed31(sp.Seed), "logprobs": 1}
	if e.cfg.Model != "" {
		body["model"] = e.cfg.Model
	}
	var resp struct {
		Choices []struct {
			Text     string `json:"text"`
			Logprobs *struct {
				Tokens        []string   `json:"tokens"`
				TokenLogprobs []*float64 `json:"token_logprobs"`
				TextOffset    []int      `json:"text_offset"`
			} `json:"logprobs"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	url := e.base + "/v1/completions"
	if err := e.post(ctx, "/v1/completions", body, &resp); err != nil {
		return Generation{}, err
	}
	if len(resp.Choices) != 1 {
		return Generation{}, fmt.Errorf("POST %s: %d choices, want 1", url, len(resp.Choices))
	}
	c := resp.Choices[0]
	if c.Logprobs == nil || c.Logprobs.TokenLogprobs == nil {
		return Generation{}, &missingError{url, "choices[0].logprobs.token_logprobs"}
	}
	lp := c.Logprobs
	if len(lp.Tokens) != len(lp.TokenLogprobs) || len(lp.TextOffset) != len(lp.Tokens) {
		return Generation{}, fmt.Errorf("POST %s: logprobs has %d tokens, %d token_logprobs, %d text_offset", url, len(lp.Tokens), len(lp.TokenLogprobs), len(lp.TextOffset))
	}
	if resp.Usage != nil && resp.Usage.CompletionTokens != len(lp.Tokens) {
		return Generation{}, fmt.Errorf("POST %s: usage.completion_tokens = %d but %d token pieces", url, resp.Usage.CompletionTokens, len(lp.Tokens))
	}
	offsets := make([]int, len(lp.TextOffset))
	base := utf8.RuneCountInString(text) // offsets count characters from the start of the prompt
	for i, o := range lp.TextOffset {
		offsets[i] = o - base
	}
	ids, err := e.pieces.split(c.Text, lp.Tokens, offsets, finish(c.FinishReason) == "length")
	if err != nil {
		return Generation{}, fmt.Errorf("POST %s: %w", url, err)
	}
	lps, err := floats(url, "choices[0].logprobs.token_logprobs", lp.TokenLogprobs)
	if err != nil {
		return Generation{}, err
	}
	g := Generation{Tokens: ids, Logprobs: lps, FinishReason: finish(c.FinishReason)}
	if g.FinishReason == "stop" {
		e.count(func(s *EngineStats) { s.EndTokenMissing++ })
	}
	return g, nil
}

// checkPrompt asks the engine to tokenise text and compares with ids (once per prompt).
func (e *EnginePolicy) checkPrompt(ctx context.Context, text string, ids []int) error {
	h := fnv.New64a()
	h.Write([]byte(text))
	key := fmt.Sprintf("%x/%d", h.Sum64(), len(ids))
	e.mu.Lock()
	ok := e.verified[key]
	e.mu.Unlock()
	if ok {
		return nil
	}
	body := map[string]any{"input": text}
	if e.cfg.Model != "" {
		body["model"] = e.cfg.Model
	}
	var resp struct {
		Tokens []int `json:"tokens"`
	}
	url := e.base + "/extras/tokenize"
	if err := e.post(ctx, "/extras/tokenize", body, &resp); err != nil {
		return fmt.Errorf("checking the engine's tokenisation of the prompt: %w", err)
	}
	if resp.Tokens == nil {
		return &missingError{url, "tokens"}
	}
	if !equalInts(resp.Tokens, ids) {
		k := 0
		for k < len(ids) && k < len(resp.Tokens) && ids[k] == resp.Tokens[k] {
			k++
		}
		return fmt.Errorf("POST %s: the engine tokenises the prompt text into %d ids, the policy's prompt has %d (first difference at %d): llama-cpp-python takes text prompts only, so this prompt cannot reach it exactly",
			url, len(resp.Tokens), len(ids), k)
	}
	e.mu.Lock()
	if len(e.verified) > 1<<14 {
		clear(e.verified)
	}
	e.verified[key] = true
	e.mu.Unlock()
	return nil
}

// pieceMapper recovers token ids from text pieces over a byte-level BPE vocabulary.
type pieceMapper struct {
	tk      *tokenizer.Tokenizer
	special map[int]bool
	rune_   [256]rune        // GPT-2's bytes_to_unicode
	partial map[string][]int // piece -> the tokens not valid UTF-8 alone that show as it
}

// maxTokenBytes bounds the bytes of one token in the search.
const maxTokenBytes = 128

func newPieceMapper(tk *tokenizer.Tokenizer) (*pieceMapper, error) {
	pm := &pieceMapper{tk: tk, special: map[int]bool{}}
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			pm.rune_[b] = rune(b)
		} else {
			pm.rune_[b] = rune(256 + n)
			n++
		}
	}
	// A byte-level BPE has the mapped space and newline (some vocabularies leave out rare
	// control bytes, which then never occur).
	for _, b := range []byte{' ', '\n', 'a'} {
		if _, ok := tk.TokenID(string(pm.rune_[b])); !ok {
			return nil, fmt.Errorf("rollout: engine protocol llama-cpp-python: the tokenizer %s is not a byte-level BPE (no token for byte 0x%02x), so token pieces cannot be mapped back to ids", tk.Name(), b)
		}
	}
	for _, s := range tk.SpecialTokens() {
		if s.Special {
			pm.special[s.ID] = true
		}
	}
	// Tokens whose bytes are not UTF-8 on their own show as a shorter piece; the bytes the
	// engine dropped are invisible when nothing after them completes a character.
	pm.partial = map[string][]int{}
	for id := range tk.VocabSize() {
		if pm.special[id] {
			continue
		}
		if d := tk.Decode([]int{id}, false); strings.ContainsRune(d, utf8.RuneError) {
			p := strings.ReplaceAll(d, string(utf8.RuneError), "")
			pm.partial[p] = append(pm.partial[p], id)
		}
	}
	return pm, nil
}

// id returns the vocabulary token whose bytes are b (special tokens excluded: the engine shows
// them as empty pieces).
func (pm *pieceMapper) id(b []byte) (int, bool) {
	rs := make([]rune, len(b))
	for i, c := range b {
		rs[i] = pm.rune_[c]
	}
	id, ok := pm.tk.TokenID(string(rs))
	if !ok || pm.special[id] {
		return 0, false
	}
	return id, true
}

// decodeIgnore is Python's bytes.decode("utf-8", errors="ignore").
func decodeIgnore(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r != utf8.RuneError || n > 1 {
			out = append(out, b[:n]...)
		}
		b = b[n:]
	}
	return string(out)
}

// split finds the token ids of a completion: the one way to cut text's bytes into
// len(pieces) vocabulary tokens where token i decodes (invalid UTF-8 ignored) to pieces[i]
// and starts at character offsets[i] of text (offsets count the characters of the decoded
// prefix, as the engine computes them). cut tells that the completion ended at its token limit.
func (pm *pieceMapper) split(text string, pieces []string, offsets []int, cut bool) ([]int, error) {
	B := []byte(text)
	n := len(pieces)
	if n == 0 {
		if text != "" {
			return nil, fmt.Errorf("no token pieces for the completion text %q", clipText(text, 60))
		}
		return nil, nil
	}
	// ways[i][pos]: number of splits (capped at 2) of B[pos:] into pieces[i:], -1 unknown.
	type state struct{ i, pos int }
	memo := map[state]int{}
	next := map[state]int{} // the token length of the (first) split found
	var ways func(i, pos int) int
	ways = func(i, pos int) int {
		if i == n {
			if pos == len(B) {
				return 1
			}
			return 0
		}
		st := state{i, pos}
		if w, ok := memo[st]; ok {
			return w
		}
		memo[st] = 0
		if want := offsets[i]; want < 0 || utf8.RuneCountInString(decodeIgnore(B[:pos])) != want {
			return 0
		}
		total := 0
		for L := max(1, len(pieces[i])); L <= maxTokenBytes && pos+L <= len(B); L++ {
			b := B[pos : pos+L]
			if decodeIgnore(b) != pieces[i] {
				continue
			}
			if _, ok := pm.id(b); !ok {
				continue
			}
			w := ways(i+1, pos+L)
			if w > 0 && total == 0 {
				next[st] = L
			}
			total = min(total+w, 2)
			if total >= 2 {
				break
			}
		}
		memo[st] = total
		return total
	}
	switch w := ways(0, 0); w {
	case 0:
		return nil, fmt.Errorf("the %d token pieces cannot be mapped to vocabulary tokens that spell the completion text exactly (%q): the token ids are unknown, so the sample cannot be trained on", n, clipText(text, 60))
	case 1:
	default:
		return nil, fmt.Errorf("the %d token pieces of %q split into vocabulary tokens in more than one way: the token ids are ambiguous, so the sample cannot be trained on", n, clipText(text, 60))
	}
	ids := make([]int, 0, n)
	pos := 0
	for i := range n {
		L := next[state{i, pos}]
		id, _ := pm.id(B[pos : pos+L])
		ids = append(ids, id)
		pos += L
	}
	// The split spells the text. A token of the same piece with extra bytes that the engine
	// dropped would have shown the same, but only where those bytes end up in no character:
	// an invalid UTF-8 sequence in the middle (taken not to happen: the split assumes the
	// completion is UTF-8) or an incomplete character at a length cut, which is common enough
	// to refuse.
	if cut {
		i := n - 1
		for _, alt := range pm.partial[pieces[i]] {
			if alt != ids[i] {
				return nil, fmt.Errorf("the completion was cut after token %d, which shows as %q, as token %d (an incomplete character, dropped by the engine) would: the last token id is ambiguous, so the sample cannot be trained on", i, pieces[i], alt)
			}
		}
	}
	// Verify by decoding: the ids spell the completion text.
	if got := pm.tk.Decode(ids, false); got != text {
		return nil, fmt.Errorf("the recovered ids decode to %q, not the completion text %q", clipText(got, 60), clipText(text, 60))
	}
	return ids, nil
}
