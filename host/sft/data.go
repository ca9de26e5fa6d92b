package sft

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/rlhost/rlhost/host/data"
	"github.com/rlhost/rlhost/sdk/task"
)

// Token rows: a parquet row with these columns is a sequence already tokenised (what
// --from-traces writes from a run's trace store): input_ids the tokens, loss_mask 1 on the
// model tokens. They are trained on as they are, without the chat template.
const (
	ColInputIDs = "input_ids"
	ColLossMask = "loss_mask"
)

// Skipped is one row that was not used.
type Skipped struct {
	File   string
	Row    int
	Reason string
	Detail string
}

func (s Skipped) String() string {
	return fmt.Sprintf("%s: row %d: %s: %s", s.File, s.Row, s.Reason, s.Detail)
}

// DataStats counts the rows read and skipped, by reason.
type DataStats struct {
	Rows    int
	Used    int
	Reasons map[string]int
	// Skipped lists the skipped rows (the first 100).
	Skipped []Skipped
}

func (s *DataStats) skip(sk Skipped) {
	if s.Reasons == nil {
		s.Reasons = map[string]int{}
	}
	s.Reasons[sk.Reason]++
	if len(s.Skipped) < 100 {
		s.Skipped = append(s.Skipped, sk)
	}
}

// Summary is one line: rows used and skipped by reason.
func (s *DataStats) Summary() string {
	var parts []string
	reasons := make([]string, 0, len(s.Reasons))
	for r := range s.Reasons {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		parts = append(parts, fmt.Sprintf("%s %d", r, s.Reasons[r]))
	}
	out := fmt.Sprintf("%d of %d rows used", s.Used, s.Rows)
	if len(parts) > 0 {
		out += "; skipped: " + strings.Join(parts, ", ")
	}
	return out
}

// LoadFiles reads and tokenises the rows of SFT parquet files. limit > 0 stops after that
// many usable rows. Rows that cannot be used are skipped and counted (DataStats); a file that
// cannot be read, or an over-long row under truncation=error, is an error.
func LoadFiles(files []string, enc *Encoder, cfg *Config, vocab int, limit int) ([]*Example, *DataStats, error) {
	st := &DataStats{}
	var out []*Example
	stop := fmt.Errorf("limit")
	for _, f := range files {
		err := data.ReadTableFunc(f, func(i int, row map[string]any) error {
			st.Rows++
			ex, sk := rowExample(row, enc, cfg, vocab)
			if sk != nil {
				if sk.Reason == ReasonTooLong && cfg.Data.Truncation == "error" {
					return fmt.Errorf("sft: %s: row %d: %s (data.truncation=error; set it to skip to skip such rows)", f, i, sk.Detail)
				}
				st.skip(Skipped{File: f, Row: i, Reason: sk.Reason, Detail: sk.Detail})
				return nil
			}
			ex.File, ex.Row = f, i
			out = append(out, ex)
			st.Used++
			if limit > 0 && len(out) >= limit {
				return stop
			}
			return nil
		})
		if err == stop {
			break
		}
		if err != nil {
			return nil, nil, err
		}
	}
	return out, st, nil
}

// rowExample turns one table row into an example.
func rowExample(row map[string]any, enc *Encoder, cfg *Config, vocab int) (*Example, *SkipError) {
	if _, ok := row[ColInputIDs]; ok {
		return tokenRow(row, enc.MaxLength, vocab)
	}
	col := cfg.MessagesColumn()
	raw, ok := row[col]
	if !ok {
		var cols []string
		for k := range row {
			cols = append(cols, k)
		}
		sort.Strings(cols)
		return nil, skip(ReasonBadRow, "no column %q (the file has %s; set data.multiturn.messages_key)", col, strings.Join(cols, ", "))
	}
	conv, err := ParseConversation(raw, row[cfg.ToolsColumn()])
	if err != nil {
		return nil, skip(ReasonBadRow, "%v", err)
	}
	return enc.Encode(conv)
}

// tokenRow reads an input_ids + loss_mask row.
func tokenRow(row map[string]any, maxLen, vocab int) (*Example, *SkipError) {
	ids, err := intList(row[ColInputIDs])
	if err != nil {
		return nil, skip(ReasonBadRow, "column %s: %v", ColInputIDs, err)
	}
	mask, err := intList(row[ColLossMask])
	if err != nil {
		return nil, skip(ReasonBadRow, "column %s: %v", ColLossMask, err)
	}
	if len(ids) != len(mask) {
		return nil, skip(ReasonBadRow, "%d input_ids and %d loss_mask values", len(ids), len(mask))
	}
	ex := &Example{IDs: make([]int32, len(ids)), Mask: make([]bool, len(ids))}
	for i, id := range ids {
		if id < 0 || (vocab > 0 && id >= int64(vocab)) {
			return nil, skip(ReasonBadRow, "input_ids[%d] = %d is outside the vocabulary [0,%d)", i, id, vocab)
		}
		ex.IDs[i] = int32(id)
		ex.Mask[i] = mask[i] != 0
	}
	if ex.LossTokens() == 0 {
		return nil, skip(ReasonNoAssistant, "loss_mask has no 1 after the first token")
	}
	if maxLen > 0 && len(ids) > maxLen {
		return nil, skip(ReasonTooLong, "%d tokens, data.max_length is %d", len(ids), maxLen)
	}
	return ex, nil
}

func intList(v any) ([]int64, error) {
	l, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("is %T, want a list of integers", v)
	}
	out := make([]int64, len(l))
	for i, x := range l {
		n, ok := x.(int64)
		if !ok {
			return nil, fmt.Errorf("[%d] is %T, want an integer", i, x)
		}
		out[i] = n
	}
	return out, nil
}

// ParseConversation reads a messages value (a list of {role, content, tool_calls,
// tool_call_id, name}, as veRL's multi-turn SFT data has it) and a tools value (a list of
// OpenAI tool schemas, or that list as a JSON string; nil for none). A tool call's arguments
// may be a JSON string or an object. Content may be a string, null, or a list of
// {type: text, text} parts.
func ParseConversation(messages, tools any) (Conversation, error) {
	var c Conversation
	if s, ok := messages.(string); ok { // a JSON string column
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return c, fmt.Errorf("messages: not valid JSON: %v", err)
		}
		messages = v
	}
	list, ok := messages.([]any)
	if !ok {
		return c, fmt.Errorf("messages is %T, want a list of messages", messages)
	}
	for i, x := range list {
		m, ok := x.(map[string]any)
		if !ok {
			return c, fmt.Errorf("messages[%d] is %T, want an object", i, x)
		}
		role, ok := m["role"].(string)
		if !ok {
			return c, fmt.Errorf("messages[%d] has no role", i)
		}
		msg := task.Message{Role: role}
		var err error
		if msg.Content, err = contentText(m["content"]); err != nil {
			return c, fmt.Errorf("messages[%d].content: %v", i, err)
		}
		msg.ToolCallID, _ = m["tool_call_id"].(string)
		msg.Name, _ = m["name"].(string)
		if tc := m["tool_calls"]; tc != nil {
			calls, ok := tc.([]any)
			if !ok {
				return c, fmt.Errorf("messages[%d].tool_calls is %T, want a list", i, tc)
			}
			for j, y := range calls {
				call, err := parseToolCall(y)
				if err != nil {
					return c, fmt.Errorf("messages[%d].tool_calls[%d]: %v", i, j, err)
				}
				msg.ToolCalls = append(msg.ToolCalls, call)
			}
		}
		c.Messages = append(c.Messages, msg)
	}
	var err error
	if c.Tools, err = ParseTools(tools); err != nil {
		return c, err
	}
	return c, nil
}

func contentText(v any) (string, error) {
	switch v := v.(type) {
	case nil:
		return "", nil
	case string:
		return v, nil
	case []any:
		var b strings.Builder
		for i, p := range v {
			pm, ok := p.(map[string]any)
			if !ok {
				return "", fmt.Errorf("part %d is %T, want {type, text}", i, p)
			}
			if t, _ := pm["type"].(string); t != "" && t != "text" {
				return "", fmt.Errorf("part %d has type %q; only text parts are supported", i, t)
			}
			s, _ := pm["text"].(string)
			b.WriteString(s)
		}
		return b.String(), nil
	}
	return "", fmt.Errorf("is %T, want a string", v)
}

func parseToolCall(v any) (task.ToolCall, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return task.ToolCall{}, fmt.Errorf("is %T, want an object", v)
	}
	fn := m
	if f, ok := m["function"].(map[string]any); ok {
		fn = f
	}
	name, _ := fn["name"].(string)
	if name == "" {
		return task.ToolCall{}, fmt.Errorf("no function name")
	}
	call := task.ToolCall{Name: name}
	call.ID, _ = m["id"].(string)
	switch a := fn["arguments"].(type) {
	case nil:
		call.Arguments = json.RawMessage("{}")
	case string:
		if !json.Valid([]byte(a)) {
			return task.ToolCall{}, fmt.Errorf("%s: arguments are not valid JSON: %q", name, clip(a, 60))
		}
		call.Arguments = json.RawMessage(a)
	default:
		b, err := json.Marshal(dropNulls(a))
		if err != nil {
			return task.ToolCall{}, fmt.Errorf("%s: arguments: %v", name, err)
		}
		call.Arguments = b
	}
	return call, nil
}

// dropNulls removes null object fields: a parquet struct column holds the union of the
// fields of every row, so a row's object comes back with nulls for the fields it lacked.
func dropNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if x != nil {
				out[k] = dropNulls(x)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = dropNulls(x)
		}
		return out
	}
	return v
}

// ParseTools reads a tools value: nil, a list of schemas ({"type": "function", "function":
// {name, description, parameters}} or the function object alone), or that list as a JSON
// string.
func ParseTools(v any) ([]task.ToolSpec, error) {
	if v == nil {
		return nil, nil
	}
	if s, ok := v.(string); ok {
		if strings.TrimSpace(s) == "" {
			return nil, nil
		}
		// Decoded keeping the bytes of each schema's parameters (their key order is what
		// the template prints).
		var raws []json.RawMessage
		if err := json.Unmarshal([]byte(s), &raws); err != nil {
			return nil, fmt.Errorf("tools: want a JSON list of tool schemas: %v", err)
		}
		var out []task.ToolSpec
		for i, r := range raws {
			var t struct {
				task.ToolSpec
				Function *task.ToolSpec `json:"function"`
			}
			if err := json.Unmarshal(r, &t); err != nil {
				return nil, fmt.Errorf("tools[%d]: %v", i, err)
			}
			spec := t.ToolSpec
			if t.Function != nil {
				spec = *t.Function
			}
			if spec.Name == "" {
				return nil, fmt.Errorf("tools[%d] has no name", i)
			}
			out = append(out, spec)
		}
		return out, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("tools is %T, want a list of tool schemas", v)
	}
	var out []task.ToolSpec
	for i, x := range list {
		m, ok := dropNulls(x).(map[string]any)
		if !ok {
			return nil, fmt.Errorf("tools[%d] is %T, want an object", i, x)
		}
		if f, ok := m["function"].(map[string]any); ok {
			m = f
		}
		name, _ := m["name"].(string)
		if name == "" {
			return nil, fmt.Errorf("tools[%d] has no name", i)
		}
		spec := task.ToolSpec{Name: name}
		spec.Description, _ = m["description"].(string)
		if p, ok := m["parameters"]; ok {
			b, err := json.Marshal(p)
			if err != nil {
				return nil, fmt.Errorf("tools[%d] (%s): parameters: %v", i, name, err)
			}
			spec.Parameters = b
		}
		out = append(out, spec)
	}
	return out, nil
}
