package tokenizer

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// spmPipeline describes FromGGUF's SentencePiece tokenizer.json to FromJSON.
type spmPipeline struct {
	stripPrefix bool // the decoder drops the one leading space add_space_prefix added
}

// spm is what a Tokenizer of a SentencePiece GGUF vocabulary keeps beside the
// Rust tokenizer, for the NUL bytes the Rust library cannot take (Encode) or
// give back (Decode).
type spm struct {
	spmPipeline
	nul int // the <0x00> token, or -1
	// marks are private-use characters no token contains: in this pipeline
	// they, like NUL, are never merged and fall back to their UTF-8 bytes.
	marks []rune
}

func newSPM(t *Tokenizer, p spmPipeline) *spm {
	s := &spm{spmPipeline: p, nul: -1}
	if id, ok := t.byContent["<0x00>"]; ok {
		s.nul = id
	}
	used := map[rune]bool{}
	nulInToken := false
	for tok := range t.byContent {
		for _, r := range tok {
			if r >= 0xE000 && r <= 0xF8FF {
				used[r] = true
			}
			nulInToken = nulInToken || r == 0
		}
	}
	if nulInToken {
		return s // NUL could merge: no stand-in behaves like it
	}
	for r := rune(0xE000); r <= 0xF8FF && len(s.marks) < 8; r++ {
		if !used[r] {
			s.marks = append(s.marks, r)
		}
	}
	return s
}

// encodeNULSPM encodes text holding NUL bytes with a SentencePiece vocabulary
// from a GGUF file, exactly as llama.cpp does. There NUL is an ordinary
// character: no token contains it, so it is never merged and becomes the
// <0x00> byte token, and the text on both sides is merged as if it were a
// boundary. A private-use character absent from the text and from every token
// behaves the same way, falling back to its three byte tokens: the text is
// encoded with that stand-in for NUL, and each run of the stand-in's three
// byte tokens becomes <0x00>. (UTF-8 is self-synchronising, so that run
// cannot come from any other character.) ok is false when the vocabulary or
// the text rules this out.
func (t *Tokenizer) encodeNULSPM(text string, addSpecial bool) (ids []int, ok bool) {
	s := t.spm
	if s == nil || s.nul < 0 {
		return nil, false
	}
	var mark rune = -1
	for _, r := range s.marks {
		if !strings.ContainsRune(text, r) {
			mark = r
			break
		}
	}
	if mark < 0 {
		return nil, false
	}
	var seq []int
	var buf [utf8.UTFMax]byte
	for _, b := range buf[:utf8.EncodeRune(buf[:], mark)] {
		id, ok := t.byContent[fmt.Sprintf("<0x%02X>", b)]
		if !ok {
			return nil, false
		}
		seq = append(seq, id)
	}
	enc := t.encode(strings.ReplaceAll(text, "\x00", string(mark)), addSpecial)
	out := enc[:0]
	n := 0
	for i := 0; i < len(enc); i++ {
		if i+len(seq) <= len(enc) && equalIDs(enc[i:i+len(seq)], seq) {
			out = append(out, s.nul)
			i += len(seq) - 1
			n++
			continue
		}
		out = append(out, enc[i])
	}
	if n != strings.Count(text, "\x00") {
		return nil, false
	}
	return out, true
}

func equalIDs(a, b []int) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// decodeSPM decodes ids as Rust tokenizers does with FromGGUF's SentencePiece
// decoder (Replace "▁" by " ", ByteFallback, Fuse, Strip one leading space with
// the prefix), for texts the library cannot hand back (a NUL byte): byte tokens
// in a row become their bytes if those are valid UTF-8, else one U+FFFD each.
func (t *Tokenizer) decodeSPM(ids []uint32, skipSpecial bool) string {
	special := map[int]bool{}
	for _, a := range t.added {
		special[a.ID] = a.Special
	}
	var out strings.Builder
	var pending []byte
	flush := func() {
		if utf8.Valid(pending) {
			out.Write(pending)
		} else {
			out.WriteString(strings.Repeat("\uFFFD", len(pending)))
		}
		pending = pending[:0]
	}
	for _, u := range ids {
		id := int(u)
		if id >= len(t.vocab) || t.vocab[id] == "" || (skipSpecial && special[id]) {
			continue
		}
		tok := strings.ReplaceAll(t.vocab[id], "▁", " ")
		var b byte
		if len(tok) == 6 && strings.HasPrefix(tok, "<0x") && tok[5] == '>' {
			if _, err := fmt.Sscanf(tok[3:5], "%02X", &b); err == nil {
				pending = append(pending, b)
				continue
			}
		}
		flush()
		out.WriteString(tok)
	}
	flush()
	text := out.String()
	if t.spm.stripPrefix {
		text = strings.TrimPrefix(text, " ")
	}
	return text
}
