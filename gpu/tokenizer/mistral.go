package tokenizer

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

const mistralToolCalls = "[TOOL_CALLS]"

var mistralListRE = regexp.MustCompile(`(?s)\[\{.*\}\]`)

// ParseMistralToolCalls reads Mistral's tool calls, as vLLM's mistral parser
// does. Nothing without the [TOOL_CALLS] token. Then either
//   - a JSON list of {"name": ..., "arguments": ..., "id": ...} objects (the
//     v2 to v7 tokenizers; "id" from v3 on, kept in ToolCall.ID): every
//     [TOOL_CALLS] is removed and the rest read as one JSON list, or, when
//     it is not one (text or an end token after it), the span from the first
//     "[{" to the last "}]"; or
//   - name[CALL_ID]id[ARGS]{...} after each [TOOL_CALLS] (v11 and later;
//     [CALL_ID] optional, and "name{...}" without [ARGS] accepted): the
//     arguments are the JSON value after the name, text after it ignored.
//
// A call without a string "name" or without "arguments", or JSON that does
// not parse, drops every call of the turn with one error, as in vLLM.
// content is the text before the first [TOOL_CALLS].
func ParseMistralToolCalls(text string) (calls []ToolCall, content string, errs []error) {
	k := strings.Index(text, mistralToolCalls)
	if k < 0 {
		return nil, text, nil
	}
	content = text[:k]
	rest := text[k+len(mistralToolCalls):]
	var err error
	if r := strings.TrimLeft(rest, " \t\r\n"); r == "" || r[0] == '[' || r[0] == '{' {
		calls, err = mistralList(strings.ReplaceAll(rest, mistralToolCalls, ""))
	} else {
		calls, err = mistralNamed(strings.Split(rest, mistralToolCalls))
	}
	if err != nil {
		return nil, text, []error{fmt.Errorf("tokenizer: mistral tool calls: %v", err)}
	}
	return calls, content, nil
}

func mistralList(s string) ([]ToolCall, error) {
	s = strings.TrimSpace(s)
	var list []json.RawMessage
	if err := json.Unmarshal([]byte(s), &list); err != nil {
		m := mistralListRE.FindString(s)
		if m == "" {
			return nil, fmt.Errorf("not a JSON list of calls (in %q)", clip(s, 80))
		}
		if err := json.Unmarshal([]byte(m), &list); err != nil {
			return nil, fmt.Errorf("not a JSON list of calls: %v (in %q)", err, clip(m, 80))
		}
	}
	calls := make([]ToolCall, 0, len(list))
	for i, raw := range list {
		c, err := callFromObject(raw, "arguments")
		if err != nil {
			return nil, fmt.Errorf("call %d: %v (in %q)", i, err, clip(string(raw), 80))
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// mistralNamed reads the v11 segments name[CALL_ID]id[ARGS]{...}.
func mistralNamed(segs []string) ([]ToolCall, error) {
	var calls []ToolCall
	for i, seg := range segs {
		if strings.TrimSpace(seg) == "" {
			continue
		}
		end := len(seg)
		for _, mark := range []string{"[CALL_ID]", "[ARGS]", "{"} {
			if j := strings.Index(seg, mark); j >= 0 && j < end {
				end = j
			}
		}
		name := strings.TrimSpace(seg[:end])
		if name == "" || end == len(seg) {
			return nil, fmt.Errorf("call %d: no name followed by arguments (in %q)", i, clip(seg, 80))
		}
		c := ToolCall{Name: name}
		rest := seg[end:]
		if after, ok := strings.CutPrefix(rest, "[CALL_ID]"); ok {
			j := strings.Index(after, "[ARGS]")
			if j < 0 {
				return nil, fmt.Errorf("call %d (%s): [CALL_ID] without [ARGS] (in %q)", i, name, clip(seg, 80))
			}
			c.ID, rest = strings.TrimSpace(after[:j]), after[j:]
		}
		rest = strings.TrimPrefix(rest, "[ARGS]")
		p := skipSpace(rest, 0)
		raw, _, err := decodeValueAt(rest, p)
		if err != nil {
			return nil, fmt.Errorf("call %d (%s): arguments are not JSON: %v (in %q)", i, name, err, clip(rest, 80))
		}
		c.Arguments = raw
		calls = append(calls, c)
	}
	return calls, nil
}
