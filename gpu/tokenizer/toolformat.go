package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// ToolFormat is how a model family writes tool calls in its text, named as
// vLLM's --tool-call-parser and veRL's multi_turn.format name them.
type ToolFormat string

const (
	// ToolFormatHermes: <tool_call>{"name": ..., "arguments": ...}</tool_call>
	// blocks (Qwen2.5, Qwen3, Hermes, SmolLM2 when taught).
	ToolFormatHermes ToolFormat = "hermes"
	// ToolFormatLlama3JSON: a JSON object {"name": ..., "parameters": ...} as
	// the message, optionally after <|python_tag|>, several separated by ";"
	// (Llama 3.1, 3.2, 3.3).
	ToolFormatLlama3JSON ToolFormat = "llama3_json"
	// ToolFormatMistral: [TOOL_CALLS] then a JSON list of {"name", "arguments"}
	// objects, with an "id" from the v3 tokenizers on (Mistral 7B v0.3, Nemo,
	// Ministral), or [TOOL_CALLS]name[CALL_ID]id[ARGS]{...} from v11 on
	// (Mistral Small 3.2, Devstral).
	ToolFormatMistral ToolFormat = "mistral"
	// ToolFormatAuto is not a format: it asks for [Tokenizer.DetectToolFormat].
	ToolFormatAuto ToolFormat = "auto"
)

// ToolFormats are the formats ParseToolCalls reads.
var ToolFormats = []ToolFormat{ToolFormatHermes, ToolFormatLlama3JSON, ToolFormatMistral}

// ParseToolFormat checks a format name ("auto" included).
func ParseToolFormat(s string) (ToolFormat, error) {
	f := ToolFormat(s)
	switch f {
	case ToolFormatHermes, ToolFormatLlama3JSON, ToolFormatMistral, ToolFormatAuto:
		return f, nil
	}
	return "", fmt.Errorf("tokenizer: unknown tool-call format %q (known: hermes, llama3_json, mistral, auto)", s)
}

// DetectToolFormat picks the tool-call format of the model from its chat
// template and special tokens, and says why: a template that writes
// <tool_call> is hermes, one that writes [TOOL_CALLS] is mistral, one with
// <|python_tag|> or the ipython role is llama3_json; without such a template,
// a [TOOL_CALLS] token means mistral and a <|python_tag|> token llama3_json;
// anything else is hermes (the format rlhost teaches by default).
func (t *Tokenizer) DetectToolFormat() (ToolFormat, string) {
	tmpl := t.chatTemplate
	switch {
	case strings.Contains(tmpl, "<tool_call>"):
		return ToolFormatHermes, "the chat template writes <tool_call>"
	case strings.Contains(tmpl, "[TOOL_CALLS]"):
		return ToolFormatMistral, "the chat template writes [TOOL_CALLS]"
	case strings.Contains(tmpl, "<|python_tag|>"):
		return ToolFormatLlama3JSON, "the chat template writes <|python_tag|>"
	case strings.Contains(tmpl, "ipython"):
		return ToolFormatLlama3JSON, "the chat template has the ipython role"
	}
	if _, ok := t.byContent["[TOOL_CALLS]"]; ok {
		return ToolFormatMistral, "the vocabulary has the [TOOL_CALLS] token"
	}
	if _, ok := t.byContent["<|python_tag|>"]; ok {
		return ToolFormatLlama3JSON, "the vocabulary has the <|python_tag|> token"
	}
	return ToolFormatHermes, "neither the chat template nor the vocabulary names another format"
}

// ParseToolCalls reads the tool calls of one assistant turn written in format
// f (not auto). content is the text outside the calls, as the matching vLLM
// parser reports it (hermes: the text with the blocks removed, trimmed;
// llama3_json: the text before the first call; mistral: the text before
// [TOOL_CALLS]); with no calls it is the whole text. errs holds one error per
// malformed call (hermes) or the reason the turn's calls were dropped
// (llama3_json, mistral: like vLLM, one bad call drops them all).
func ParseToolCalls(f ToolFormat, text string) (calls []ToolCall, content string, errs []error) {
	switch f {
	case ToolFormatLlama3JSON:
		return ParseLlama3ToolCalls(text)
	case ToolFormatMistral:
		return ParseMistralToolCalls(text)
	default:
		calls, errs = ParseHermesToolCalls(text)
		if len(calls) == 0 && len(errs) == 0 {
			return nil, text, nil
		}
		return calls, strings.TrimSpace(hermesRE.ReplaceAllString(text, "")), errs
	}
}

// FormatToolCalls writes calls as a model of format f writes them (the text
// the matching parser reads back): hermes blocks one a line, llama3_json
// objects with "parameters" separated by "; ", mistral's [TOOL_CALLS] list
// (with each call's "id" when it has one). JSON is spaced as Python's
// json.dumps writes it, keys in their order.
func FormatToolCalls(f ToolFormat, calls []ToolCall) string {
	var b strings.Builder
	switch f {
	case ToolFormatLlama3JSON:
		for i, c := range calls {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(`{"name": ` + jsonString(c.Name) + `, "parameters": ` + PySpacedJSON(c.Arguments) + "}")
		}
	case ToolFormatMistral:
		b.WriteString("[TOOL_CALLS][")
		for i, c := range calls {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(`{"name": ` + jsonString(c.Name) + `, "arguments": ` + PySpacedJSON(c.Arguments))
			if c.ID != "" {
				b.WriteString(`, "id": ` + jsonString(c.ID))
			}
			b.WriteString("}")
		}
		b.WriteString("]")
	default:
		for i, c := range calls {
			if i > 0 {
				b.WriteString("\n")
			}
			b.WriteString("<tool_call>\n{\"name\": " + jsonString(c.Name) + ", \"arguments\": " + PySpacedJSON(c.Arguments) + "}\n</tool_call>")
		}
	}
	return b.String()
}

func jsonString(s string) string {
	var b strings.Builder
	pyQuote(&b, s, false)
	return b.String()
}

// PySpacedJSON re-writes JSON with Python's json.dumps separators (", " and
// ": "), keeping the order of object keys; empty input is {}. Input that is
// not valid JSON is returned as it is.
func PySpacedJSON(raw json.RawMessage) string {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "{}"
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	src := b.Bytes()
	var out strings.Builder
	inStr, esc := false, false
	for _, ch := range src {
		out.WriteByte(ch)
		switch {
		case inStr && esc:
			esc = false
		case inStr && ch == '\\':
			esc = true
		case ch == '"':
			inStr = !inStr
		case !inStr && (ch == ',' || ch == ':'):
			out.WriteByte(' ')
		}
	}
	return out.String()
}

// callFromObject reads one {"name": ..., "<argsKey>": ...} object (argsKeys
// in order of preference; the first present wins) as vLLM does: the name must
// be a string, the arguments must be present (any JSON value, kept as the
// model wrote it); an "id" string is kept.
func callFromObject(raw json.RawMessage, argsKeys ...string) (ToolCall, error) {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return ToolCall{}, fmt.Errorf("not a JSON object")
	}
	var name string
	if err := json.Unmarshal(obj["name"], &name); err != nil || name == "" {
		return ToolCall{}, fmt.Errorf("no \"name\" string")
	}
	var args json.RawMessage
	for _, k := range argsKeys {
		if a, ok := obj[k]; ok {
			args = a
			break
		}
	}
	if args == nil {
		return ToolCall{}, fmt.Errorf("call %q has no \"%s\"", name, strings.Join(argsKeys, "\" or \""))
	}
	c := ToolCall{Name: name, Arguments: json.RawMessage(bytes.TrimSpace(args))}
	if id, ok := obj["id"]; ok {
		_ = json.Unmarshal(id, &c.ID)
	}
	return c, nil
}

// decodeValueAt decodes the JSON value starting at s[i] and returns its bytes
// and the offset just after it.
func decodeValueAt(s string, i int) (json.RawMessage, int, error) {
	dec := json.NewDecoder(strings.NewReader(s[i:]))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return nil, i, err
	}
	return raw, i + int(dec.InputOffset()), nil
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}
