package rollout

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/sdk/task"
)

// The tool agent reads the calls of the configured format, keeps a Mistral id the model wrote
// (or gives a 9-character one), and hands each tool result back with its call's id.
func TestToolAgentFormats(t *testing.T) {
	llama := `{"name": "calc_gsm8k_reward", "parameters": {"answer": "72"}}`
	for _, tt := range []struct {
		name   string
		format tokenizer.ToolFormat
		turn   string
		calls  int
		id     string
	}{
		{"hermes", tokenizer.ToolFormatHermes, callTool, 1, "call_1_0"},
		{"llama3_json", tokenizer.ToolFormatLlama3JSON, llama, 1, "call_1_0"},
		{"llama3_json python_tag", tokenizer.ToolFormatLlama3JSON, "<|python_tag|>" + llama, 1, "call_1_0"},
		{"mistral with id", tokenizer.ToolFormatMistral, `[TOOL_CALLS][{"name": "calc_gsm8k_reward", "arguments": {"answer": "72"}, "id": "a1b2c3d4e"}]`, 1, "a1b2c3d4e"},
		{"mistral without id", tokenizer.ToolFormatMistral, `[TOOL_CALLS] [{"name": "calc_gsm8k_reward", "arguments": {"answer": "72"}}]`, 1, "t001c0000"},
		{"hermes does not read llama3 json", tokenizer.ToolFormatHermes, llama, 0, ""},
		{"mistral does not read hermes", tokenizer.ToolFormatMistral, callTool, 0, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out, _, _ := run(t, Config{ResponseLength: 400, ToolFormat: tt.format}, tt.turn, "The answer is #### 72")
			if out.ToolCalls != tt.calls || out.ParseErrors != 0 {
				t.Fatalf("tool calls %d parse errors %d, want %d and 0", out.ToolCalls, out.ParseErrors, tt.calls)
			}
			if tt.calls == 0 {
				return
			}
			var asst, tool *task.Message
			for i := range out.Messages {
				switch m := &out.Messages[i]; {
				case m.Role == "assistant" && asst == nil:
					asst = m
				case m.Role == "tool" && tool == nil:
					tool = m
				}
			}
			if asst == nil || tool == nil || len(asst.ToolCalls) != 1 || asst.ToolCalls[0].ID != tt.id || tool.ToolCallID != tt.id {
				t.Fatalf("assistant %+v tool %+v; want the call and the result with id %q", asst, tool, tt.id)
			}
			if !ValidToolCallID(tokenizer.ToolFormatMistral, ToolCallID(tokenizer.ToolFormatMistral, 999, 12)) {
				t.Error("generated Mistral id is not 9 letters and digits")
			}
		})
	}
}

// data.apply_chat_template_kwargs reach every render: the prompt, the observation.
func TestChatKwargs(t *testing.T) {
	dir := filepath.Join("..", "sft", "testdata", "tiny-chat")
	data, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tk, err := tokenizer.FromJSON("tiny", data, tokenizer.Config{EOS: "<|im_end|>",
		ChatTemplate: "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% if think is defined and think is false %}NOTHINK{% endif %}{% endif %}"})
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	for _, kw := range []map[string]any{nil, {"think": false}} {
		c := Chat{Tok: tk, Kwargs: kw}
		ids, err := c.EncodePrompt(SingleTurnAgent, task.Prompt{Messages: []task.Message{{Role: "user", Content: "hi"}}})
		if err != nil {
			t.Fatal(err)
		}
		obs, err := c.EncodeObservation([]task.Message{{Role: "tool", Content: "r"}})
		if err != nil {
			t.Fatal(err)
		}
		want := kw != nil
		if got := strings.Contains(tk.Decode(ids, false), "NOTHINK"); got != want {
			t.Errorf("kwargs %v: prompt has NOTHINK %v", kw, got)
		}
		if got := strings.Contains(tk.Decode(obs, false), "NOTHINK"); got != want {
			t.Errorf("kwargs %v: observation has NOTHINK %v", kw, got)
		}
	}
}
