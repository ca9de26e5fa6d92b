package tokenizer

import (
	"fmt"
	"strings"
)

// ParseLlama3ToolCalls reads Llama 3's JSON tool calls, as vLLM's llama3_json
// parser does: the first JSON object in the text ({"name": ..., "parameters":
// {...}}, "arguments" accepted in place of "parameters" and preferred when
// both are there), optionally after <|python_tag|>, and the objects that
// follow it separated by ";". Text before and after the calls is ignored (the
// first "{" starts the calls). One object that is not valid JSON, has no
// string "name", or has neither "parameters" nor "arguments" drops every call
// of the turn, with one error saying why; vLLM does the same. Unlike vLLM's
// regular expression, arguments may nest to any depth. content is the text
// before the first call, <|python_tag|> removed, trimmed.
func ParseLlama3ToolCalls(text string) (calls []ToolCall, content string, errs []error) {
	start := strings.IndexByte(text, '{')
	if start < 0 {
		return nil, text, nil
	}
	for i := start; ; {
		raw, end, err := decodeValueAt(text, i)
		if err != nil {
			return nil, text, []error{fmt.Errorf("tokenizer: llama3_json tool call %d: not a JSON object: %v (in %q)", len(calls), err, clip(text[i:], 80))}
		}
		c, err := callFromObject(raw, "arguments", "parameters")
		if err != nil {
			return nil, text, []error{fmt.Errorf("tokenizer: llama3_json tool call %d: %v (in %q)", len(calls), err, clip(string(raw), 80))}
		}
		c.ID = ""
		calls = append(calls, c)
		j := skipSpace(text, end)
		if j >= len(text) || text[j] != ';' {
			break
		}
		j = skipSpace(text, j+1)
		if j >= len(text) || text[j] != '{' {
			break
		}
		i = j
	}
	content = strings.TrimSpace(strings.ReplaceAll(text[:start], "<|python_tag|>", ""))
	return calls, content, nil
}
