package gsm8k

import (
	"encoding/json"
	"regexp"
	"strings"
)

// SFTMessagesKey is the extra_info key under which a preprocessor gives a row's cold-start
// trajectory: the messages that follow the row's prompt, in OpenAI's shape. rlhost preprocess
// moves them out of the RL row into sft/SPLIT.parquet (docs/sft.md).
const SFTMessagesKey = "sft_messages"

var calcAnnotation = regexp.MustCompile(`<<[^<>]*>>`)

// ColdStart is the tool-using trajectory a reference solution gives: the solution's
// reasoning (without its <<calculator>> annotations and its "#### N" line) with a call of
// calc_gsm8k_reward with the answer, the tool's reply for that answer, then "#### N".
// Messages are JSON-like values (for extra_info): {role, content, tool_calls: [{type,
// function: {name, arguments (a JSON string)}}]}.
func ColdStart(answer, solution string) []any {
	reasoning := answer
	if i := strings.LastIndex(reasoning, "####"); i >= 0 {
		reasoning = reasoning[:i]
	}
	reasoning = strings.TrimSpace(calcAnnotation.ReplaceAllString(reasoning, ""))
	args, _ := json.Marshal(map[string]string{"answer": solution})
	reply := NewTool(solution).ExecuteAnswer(solution)
	return []any{
		map[string]any{"role": "assistant", "content": reasoning, "tool_calls": []any{map[string]any{
			"type": "function", "function": map[string]any{"name": ToolName, "arguments": string(args)}}}},
		map[string]any{"role": "tool", "content": reply.Text},
		map[string]any{"role": "assistant", "content": "#### " + solution},
	}
}
