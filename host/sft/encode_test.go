package sft

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/host/data"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
)

var calcTool = []task.ToolSpec{{Name: "calc", Description: "Evaluate an arithmetic expression.",
	Parameters: json.RawMessage(`{"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}`)}}

func msg(role, content string) task.Message { return task.Message{Role: role, Content: content} }

func callMsg(content, name, args string) task.Message {
	return task.Message{Role: "assistant", Content: content, ToolCalls: []task.ToolCall{{Name: name, Arguments: json.RawMessage(args)}}}
}

// plainTemplate is a chat template that ignores tool calls (as SmolLM2's does).
const plainTemplate = "{%- for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}" +
	"{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"

func plainTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	b, err := os.ReadFile(tinyChat + "/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	tk, err := tokenizer.FromJSON("plain", b, tokenizer.Config{EOS: "<|im_end|>", ChatTemplate: plainTemplate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tk.Close() })
	return tk
}

// TestEncodeSkips: bad rows are skipped with their named reason, never cut.
func TestEncodeSkips(t *testing.T) {
	tiny := tinyTokenizer(t)
	plain := plainTokenizer(t)
	long := strings.Repeat("x", 300)
	for _, c := range []struct {
		name   string
		tk     *tokenizer.Tokenizer
		max    int
		conv   Conversation
		reason string
	}{
		{"no assistant", tiny, 0, Conversation{Messages: []task.Message{msg("user", "hi")}}, ReasonNoAssistant},
		{"bad role", tiny, 0, Conversation{Messages: []task.Message{msg("robot", "hi"), msg("assistant", "x")}}, ReasonBadRow},
		{"unknown tool", tiny, 0, Conversation{Messages: []task.Message{msg("user", "2+2"), callMsg("", "search", `{"q": "2+2"}`)}, Tools: calcTool}, ReasonUnknownTool},
		{"no tools declared", tiny, 0, Conversation{Messages: []task.Message{msg("user", "2+2"), callMsg("", "calc", `{"expression": "2+2"}`)}}, ReasonUnknownTool},
		{"unknown tool as text", tiny, 0, Conversation{Messages: []task.Message{msg("user", "2+2"),
			msg("assistant", HermesCall("search", json.RawMessage(`{}`)))}, Tools: calcTool}, ReasonUnknownTool},
		{"template without tool calls", plain, 0, Conversation{Messages: []task.Message{msg("user", "2+2"), callMsg("", "calc", `{"expression": "2+2"}`)}, Tools: calcTool}, ReasonTemplateNoTools},
		{"too long", tiny, 100, Conversation{Messages: []task.Message{msg("user", long), msg("assistant", "ok")}}, ReasonTooLong},
	} {
		enc := &Encoder{Tok: c.tk, MaxLength: c.max}
		ex, sk := enc.Encode(c.conv)
		if sk == nil || sk.Reason != c.reason {
			t.Errorf("%s: got example %v, skip %v; want reason %s", c.name, ex != nil, sk, c.reason)
		}
	}
}

// TestEncodeMatchesRollout: a conversation is laid out as the tool agent lays out a
// trajectory: the prompt is rollout.EncodePrompt's tokens, each observation
// rollout.EncodeObservation's, and an assistant turn the tokens of its text up to the eos
// token (what the policy generates); tool calls the template cannot render are written as the
// Hermes text the rollout's parser reads, and parse back to the same call.
func TestEncodeMatchesRollout(t *testing.T) {
	tk := plainTokenizer(t)
	conv := Conversation{Messages: []task.Message{msg("system", "Use the tool."), msg("user", "12*7?"),
		callMsg("I will compute.", "calc", `{"expression":"12*7"}`), msg("tool", "84"), msg("assistant", "#### 84")}, Tools: calcTool}
	enc := &Encoder{Tok: tk, ToolCallsAsText: true}
	ex, sk := enc.Encode(conv)
	if sk != nil {
		t.Fatal(sk)
	}
	prompt, err := rollout.Chat{Tok: tk}.EncodePrompt(rollout.ToolAgent, task.Prompt{Messages: conv.Messages[:2], Tools: calcTool})
	if err != nil {
		t.Fatal(err)
	}
	call := "I will compute.\n" + `<tool_call>
{"name": "calc", "arguments": {"expression": "12*7"}}
</tool_call>`
	turn1 := append(tk.Encode(call, false), tk.EOS())
	obs, err := rollout.Chat{Tok: tk}.EncodeObservation(conv.Messages[3:4])
	if err != nil {
		t.Fatal(err)
	}
	turn2 := append(tk.Encode("#### 84", false), tk.EOS())
	var want []int
	var mask []bool
	for _, part := range []struct {
		ids   []int
		model bool
	}{{prompt, false}, {turn1, true}, {obs, false}, {turn2, true}} {
		want = append(want, part.ids...)
		for range part.ids {
			mask = append(mask, part.model)
		}
	}
	if got := i32s(ex.IDs); !equalInts(got, want) {
		t.Fatalf("tokens\n got %q\nwant %q", tk.Decode(got, false), tk.Decode(want, false))
	}
	for i := range mask {
		if ex.Mask[i] != mask[i] {
			t.Fatalf("mask[%d] = %v, want %v", i, ex.Mask[i], mask[i])
		}
	}
	calls, errs := tokenizer.ParseHermesToolCalls(tk.Decode(turn1, false))
	if len(errs) > 0 || len(calls) != 1 || calls[0].Name != "calc" || string(calls[0].Arguments) != `{"expression": "12*7"}` {
		t.Errorf("the turn's text parses as %v %v", calls, errs)
	}
}

func equalInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestParseConversation(t *testing.T) {
	// As parquet gives it back: arguments as an object with a null from the struct union,
	// content as text parts, tools as a JSON string.
	msgs := []any{
		map[string]any{"role": "user", "content": []any{map[string]any{"type": "text", "text": "a"}, map[string]any{"type": "text", "text": "b"}}},
		map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "c1", "type": "function",
			"function": map[string]any{"name": "calc", "arguments": map[string]any{"expression": "1+1", "unused": nil}}}}},
	}
	tools, _ := json.Marshal([]json.RawMessage{calcTool[0].OpenAI()})
	c, err := ParseConversation(msgs, string(tools))
	if err != nil {
		t.Fatal(err)
	}
	if c.Messages[0].Content != "ab" || c.Messages[1].ToolCalls[0].ID != "c1" || string(c.Messages[1].ToolCalls[0].Arguments) != `{"expression":"1+1"}` {
		t.Errorf("parsed %+v", c.Messages)
	}
	if len(c.Tools) != 1 || string(c.Tools[0].OpenAI()) != string(calcTool[0].OpenAI()) {
		t.Errorf("tools %+v", c.Tools)
	}
	for _, bad := range []struct {
		msgs, tools any
		want        string
	}{
		{"nope", nil, "not valid JSON"},
		{[]any{map[string]any{"content": "x"}}, nil, "has no role"},
		{[]any{map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"function": map[string]any{"name": "f", "arguments": "{bad"}}}}}, nil, "not valid JSON"},
		{[]any{}, `[{"type": "function", "function": {}}]`, "has no name"},
		{[]any{}, int64(3), "want a list"},
	} {
		if _, err := ParseConversation(bad.msgs, bad.tools); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseConversation(%v, %v) = %v, want an error with %q", bad.msgs, bad.tools, err, bad.want)
		}
	}
}

func TestConfigLoad(t *testing.T) {
	c, err := Load(nil, []string{"data.train_files=a.parquet", "+optim.lr=2e-5", "data.multiturn.messages_key=conv", "trainer.total_training_steps=3"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Data.TrainFiles) != 1 || c.Optim.LR != 2e-5 || c.MessagesColumn() != "conv" || *c.Trainer.TotalTrainingSteps != 3 || c.Optim.Betas[1] != 0.95 {
		t.Errorf("loaded %+v", c)
	}
	for _, bad := range []struct{ o, want string }{
		{"optim.lrr=1", "did you mean optim.lr"},
		{"data.truncation=left", "data.truncation"},
		{"optim.lr=x", "optim"},
		{"nokey", "want key=value"},
		{"data.micro_batch_size_per_gpu=0", "micro_batch_size_per_gpu"},
		{"data.multiturn.format=llama3", "data.multiturn.format"},
		{"data.apply_chat_template_kwargs={messages: []}", "data.apply_chat_template_kwargs.messages"},
	} {
		if _, err := Load(nil, []string{bad.o}); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Load(%q) = %v, want an error with %q", bad.o, err, bad.want)
		}
	}
	if c, err := Load(nil, []string{"data.apply_chat_template_kwargs={enable_thinking: false}", "data.multiturn.format=mistral"}); err != nil ||
		c.Data.ApplyChatTemplateKwargs["enable_thinking"] != false || c.Data.Multiturn.Format != "mistral" {
		t.Errorf("kwargs and format: %+v %v", c, err)
	}
	if !strings.Contains(KeysMarkdown(), "`data.multiturn.tool_calls_as_text`") {
		t.Error("KeysMarkdown misses a key")
	}
}

// TestLearningRate: the optim section as algo.LRSchedule (tested there): the warm-up steps of
// warmup_steps_ratio, cosine or constant after them.
func TestLearningRate(t *testing.T) {
	o := OptimConfig{LR: 1, WarmupStepsRatio: 0.2, LRScheduler: "cosine", MinLRRatio: 0.1}
	for _, c := range []struct {
		step int
		want float64
	}{{1, 0.5}, {2, 1}, {6, 0.55}, {10, 0.1}} {
		if got := lrSchedule(o, 10).At(c.step, 10); got < c.want-1e-9 || got > c.want+1e-9 {
			t.Errorf("step %d: lr %g, want %g", c.step, got, c.want)
		}
	}
	for _, sched := range []string{"constant", "wsd"} {
		o.LRScheduler = sched
		if got := lrSchedule(o, 10).At(9, 10); got != 1 {
			t.Errorf("%s after warm-up: %g", sched, got)
		}
	}
}

// TestLoadFilesSkips: each kind of bad row in a file is skipped, counted under its reason and
// reported with the file and its row; the good rows are used.
func TestLoadFilesSkips(t *testing.T) {
	tools := `[{"type": "function", "function": {"name": "calc", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}]`
	user := map[string]any{"role": "user", "content": "2+2?"}
	answer := map[string]any{"role": "assistant", "content": "#### 4"}
	callOf := func(name string) map[string]any {
		return map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"type": "function",
			"function": map[string]any{"name": name, "arguments": `{"expression": "2+2"}`}}}}
	}
	rows := []map[string]any{
		{"tools": tools, "messages": []any{user, answer}}, // 0: good
		{"tools": tools, "messages": []any{user}},         // 1: no assistant turn
		{"tools": tools, "messages": []any{user, callOf("search"), map[string]any{"role": "tool", "content": "4"}, answer}}, // 2: unknown tool
		{"tools": tools, "messages": []any{user, callOf("calc"), map[string]any{"role": "tool", "content": "4"}, answer}},   // 3: the template drops the call
		{"tools": tools, "messages": []any{map[string]any{"role": "user", "content": strings.Repeat("2+2 ", 200)}, answer}}, // 4: too long
		{"tools": tools, "messages": []any{user, answer}},                                                                   // 5: good
	}
	file := t.TempDir() + "/train.parquet"
	if err := data.WriteTable(file, []string{"messages", "tools"}, rows); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(nil, []string{"data.truncation=skip"})
	if err != nil {
		t.Fatal(err)
	}
	enc := &Encoder{Tok: plainTokenizer(t), MaxLength: 120}
	exs, st, err := LoadFiles([]string{file}, enc, cfg, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(exs) != 2 || exs[0].Row != 0 || exs[1].Row != 5 || st.Rows != 6 || st.Used != 2 {
		t.Fatalf("%d examples; %s", len(exs), st.Summary())
	}
	want := []Skipped{{file, 1, ReasonNoAssistant, ""}, {file, 2, ReasonUnknownTool, ""}, {file, 3, ReasonTemplateNoTools, ""}, {file, 4, ReasonTooLong, ""}}
	if len(st.Skipped) != len(want) {
		t.Fatalf("skipped %v", st.Skipped)
	}
	for i, w := range want {
		got := st.Skipped[i]
		if got.File != w.File || got.Row != w.Row || got.Reason != w.Reason || got.Detail == "" || st.Reasons[w.Reason] != 1 {
			t.Errorf("skipped[%d] = %v (count %d), want %s row %d %s with a detail", i, got, st.Reasons[w.Reason], w.File, w.Row, w.Reason)
		}
	}
	if s := st.Summary(); s != "2 of 6 rows used; skipped: no_assistant_turn 1, template_cannot_render_tool_calls 1, too_long 1, unknown_tool 1" {
		t.Errorf("summary %q", s)
	}
	// Over-long rows stop the run under data.truncation=error, naming the file and row.
	cfg.Data.Truncation = "error"
	if _, _, err := LoadFiles([]string{file}, enc, cfg, 0, 0); err == nil || !strings.Contains(err.Error(), file+": row 4: ") {
		t.Errorf("truncation=error: %v", err)
	}
}

// tool_calls_as_text writes the calls in data.multiturn.format, and the rollout's parser of
// that format reads the encoded turn back as the same call (the content stays outside it).
func TestToolCallsAsTextFormats(t *testing.T) {
	tk := plainTokenizer(t)
	for _, tt := range []struct {
		format tokenizer.ToolFormat
		text   string
	}{
		{tokenizer.ToolFormatHermes, "I will compute.\n<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expression\": \"12*7\"}}\n</tool_call>"},
		{tokenizer.ToolFormatLlama3JSON, "I will compute.\n{\"name\": \"calc\", \"parameters\": {\"expression\": \"12*7\"}}"},
		{tokenizer.ToolFormatMistral, "I will compute.[TOOL_CALLS][{\"name\": \"calc\", \"arguments\": {\"expression\": \"12*7\"}}]"},
	} {
		conv := Conversation{Messages: []task.Message{msg("user", "12*7?"),
			callMsg("I will compute.", "calc", `{"expression":"12*7"}`), msg("tool", "84"), msg("assistant", "#### 84")}, Tools: calcTool}
		ex, sk := (&Encoder{Tok: tk, Format: tt.format, ToolCallsAsText: true}).Encode(conv)
		if sk != nil {
			t.Fatalf("%s: %v", tt.format, sk)
		}
		prompt, _ := rollout.Chat{Tok: tk}.EncodePrompt(rollout.ToolAgent, task.Prompt{Messages: conv.Messages[:1], Tools: calcTool})
		turn := append(tk.Encode(tt.text, false), tk.EOS())
		got := i32s(ex.IDs)
		if len(got) < len(prompt)+len(turn) || !equalInts(got[len(prompt):len(prompt)+len(turn)], turn) {
			t.Errorf("%s: turn\n got %q\nwant %q", tt.format, tk.Decode(got[len(prompt):], false), tt.text)
			continue
		}
		calls, content, errs := tokenizer.ParseToolCalls(tt.format, tk.Decode(turn, false))
		if len(errs) > 0 || len(calls) != 1 || calls[0].Name != "calc" || string(calls[0].Arguments) != `{"expression": "12*7"}` ||
			!strings.HasPrefix(content, "I will compute.") {
			t.Errorf("%s: the turn parses as %v %q %v", tt.format, calls, content, errs)
		}
	}
}
