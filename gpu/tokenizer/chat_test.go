package tokenizer

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

type chatGolden struct {
	Name                string            `json:"name"`
	Messages            []Message         `json:"messages"`
	Tools               []json.RawMessage `json:"tools"`
	AddGenerationPrompt bool              `json:"add_generation_prompt"`
	Kwargs              map[string]any    `json:"kwargs"`
	Text                string            `json:"text"`
	IDs                 []int             `json:"ids"`
}

// TestChatTemplateGoldens renders every golden conversation (with and
// without tools, tool-call and tool-response turns, add_generation_prompt
// both ways) and compares bytes with transformers' apply_chat_template.
func TestChatTemplateGoldens(t *testing.T) {
	for _, m := range models(t) {
		t.Run(m.name, func(t *testing.T) {
			tk := m.tk(t)
			var goldens []chatGolden
			readJSON(t, "chat_"+m.name+".json", &goldens)
			for _, g := range goldens {
				got, err := tk.ApplyChatTemplateKwargs(g.Messages, g.Tools, g.AddGenerationPrompt, g.Kwargs)
				if err != nil {
					t.Errorf("%s agp=%v: %v", g.Name, g.AddGenerationPrompt, err)
					continue
				}
				if got != g.Text {
					t.Errorf("%s agp=%v: rendered text differs at byte %d:\n got %q\nwant %q",
						g.Name, g.AddGenerationPrompt, firstDiff(got, g.Text), got, g.Text)
					continue
				}
				if ids := tk.Encode(got, false); g.IDs == nil || !slices.Equal(ids, g.IDs) {
					t.Errorf("%s agp=%v: ids %v, want %v", g.Name, g.AddGenerationPrompt, ids, g.IDs)
				}
			}
		})
	}
}

func firstDiff(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}

type obsGolden struct {
	Name     string         `json:"name"`
	Messages []Message      `json:"messages"`
	Kwargs   map[string]any `json:"kwargs"`
	Full     string         `json:"full"`
	Text     string         `json:"text"`
}

// TestRenderObservation compares with veRL's way of templating observation
// messages alone (goldens: Python, see make_goldens.py obs_records).
func TestRenderObservation(t *testing.T) {
	for _, m := range models(t) {
		t.Run(m.name, func(t *testing.T) {
			tk := m.tk(t)
			var goldens []obsGolden
			readJSON(t, "obs_"+m.name+".json", &goldens)
			for _, g := range goldens {
				full, err := tk.ApplyChatTemplateKwargs(g.Messages, nil, true, g.Kwargs)
				if err != nil || full != g.Full {
					t.Errorf("%s: full render %q, %v; want %q", g.Name, full, err, g.Full)
				}
				got, err := tk.RenderObservationKwargs(g.Messages, g.Kwargs)
				if err != nil {
					t.Errorf("%s: %v", g.Name, err)
					continue
				}
				if got != g.Text {
					t.Errorf("%s: RenderObservation = %q, want %q", g.Name, got, g.Text)
				}
			}
		})
	}
}

// TestHermesRoundTrip: the Qwen3 template renders assistant tool calls, and
// ParseHermesToolCalls reads the same calls back from the rendered turn.
func TestHermesRoundTrip(t *testing.T) {
	tk := load(t, qwen3Dir(t))
	calls := []ToolCall{
		{Name: "calc_gsm8k_reward", Arguments: json.RawMessage(`{"answer": "72"}`)},
		{Name: "get_weather", Arguments: json.RawMessage(`{"zeta_location": "東京", "days": 2, "ratio": 0.25, "nested": {"b": [1, 2.5, null], "a": "x</tool_call"}}`)},
		{Name: "no_args", Arguments: json.RawMessage(`{}`)},
	}
	msgs := []Message{
		{Role: "user", Content: "q"},
		{Role: "assistant", Content: "Let me call tools.", ToolCalls: calls},
	}
	text, err := tk.ApplyChatTemplate(msgs, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	turn := text[strings.LastIndex(text, "<|im_start|>assistant\n"):]
	got, errs := ParseHermesToolCalls(turn)
	if len(errs) > 0 {
		t.Fatalf("parse errors: %v in %q", errs, turn)
	}
	if len(got) != len(calls) {
		t.Fatalf("parsed %d calls from %q, want %d", len(got), turn, len(calls))
	}
	for i := range calls {
		if got[i].Name != calls[i].Name || !sameJSON(t, got[i].Arguments, calls[i].Arguments) {
			t.Errorf("call %d: got %s(%s), want %s(%s)", i, got[i].Name, got[i].Arguments, calls[i].Name, calls[i].Arguments)
		}
	}
	// The parsed calls render back to the same text.
	again, err := tk.ApplyChatTemplate([]Message{msgs[0], {Role: "assistant", Content: "Let me call tools.", ToolCalls: got}}, nil, false)
	if err != nil || again != text {
		t.Errorf("re-render differs: %v\n got %q\nwant %q", err, again, text)
	}
}

func sameJSON(t *testing.T, a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func TestParseHermesToolCalls(t *testing.T) {
	tests := []struct {
		name    string
		text    string
		want    []string // name + compact args
		errWant []string
	}{
		{"none", "just text", nil, nil},
		{"one", `<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>`, []string{`f{"x":1}`}, nil},
		{"multiline", "a\n<tool_call>\n{\"name\": \"f\",\n \"arguments\": {\"x\": \"a\\nb\"}}\n</tool_call>\nb", []string{`f{"x":"a\nb"}`}, nil},
		{"two non-greedy", `<tool_call>{"name": "f", "arguments": {}}</tool_call> mid <tool_call>{"name": "g", "arguments": {"y": [1]}}</tool_call>`, []string{`f{}`, `g{"y":[1]}`}, nil},
		{"no arguments", `<tool_call>{"name": "f"}</tool_call>`, []string{`f{}`}, nil},
		{"bad json skipped", `<tool_call>{"name": "f", "arguments": {</tool_call><tool_call>{"name": "g", "arguments": {}}</tool_call>`, []string{`g{}`}, []string{"tool call 0: not a JSON object"}},
		{"no name", `<tool_call>{"arguments": {}}</tool_call>`, nil, []string{`tool call 0: no "name"`}},
		{"trailing text", `<tool_call>{"name": "f"} extra</tool_call>`, nil, []string{"text after the JSON object"}},
		{"unclosed", `<tool_call>{"name": "f"}`, nil, nil},
		{"string arguments kept", `<tool_call>{"name": "f", "arguments": "{\"x\": 1}"}</tool_call>`, []string{`f"{\"x\": 1}"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, errs := ParseHermesToolCalls(tt.text)
			var got []string
			for _, c := range calls {
				var buf bytes.Buffer
				json.Compact(&buf, c.Arguments)
				got = append(got, c.Name+buf.String())
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("calls = %q, want %q", got, tt.want)
			}
			if len(errs) != len(tt.errWant) {
				t.Fatalf("errors = %v, want %d", errs, len(tt.errWant))
			}
			for i, e := range errs {
				if !strings.Contains(e.Error(), tt.errWant[i]) || !strings.HasPrefix(e.Error(), "tokenizer: ") {
					t.Errorf("error %q, want %q", e, tt.errWant[i])
				}
			}
		})
	}
}

func FuzzParseHermesToolCalls(f *testing.F) {
	f.Add(`<tool_call>{"name": "f", "arguments": {"x": 1}}</tool_call>`)
	f.Add("<tool_call>\n{\"name\": \"f\"}\n</tool_call><tool_call>{</tool_call>")
	f.Add(`<tool_call><tool_call>{"name": 1}</tool_call></tool_call>`)
	f.Fuzz(func(t *testing.T, s string) {
		calls, _ := ParseHermesToolCalls(s)
		for _, c := range calls {
			if c.Name == "" || !json.Valid(c.Arguments) {
				t.Errorf("bad call %+v", c)
			}
		}
	})
}

// TestTemplateErrors: a template that does not parse or fails to render
// gives an error naming the template line; raise_exception's message is kept.
func TestTemplateErrors(t *testing.T) {
	tests := []struct {
		name, src string
		want      []string
	}{
		{"syntax", "{% for m in messages %}\n{{ m.content }\n{% endfor %}", []string{"does not parse", "line 2"}},
		{"unclosed block", "ok\n{% if messages %}\nyes", []string{"does not parse"}},
		{"raise", "{% if messages|length > 1 %}{{ raise_exception('Only one message, please') }}{% endif %}", []string{"raised an exception: Only one message, please"}},
		{"unknown filter", "line one\n{{ messages | nosuchfilter }}", []string{"nosuchfilter", "line 2"}},
		{"no template", "", []string{"has no chat template"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := &Tokenizer{name: "test/tokenizer.json", chatTemplate: tt.src, pad: -1, unk: -1}
			_, err := tk.ApplyChatTemplate([]Message{{Role: "user", Content: "a"}, {Role: "user", Content: "b"}}, nil, true)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if !strings.HasPrefix(err.Error(), "tokenizer: test/tokenizer.json: ") {
				t.Errorf("error %q does not name the tokenizer", err)
			}
		})
	}
}

// TestTemplateFeatures covers what HF templates use beyond the goldens'
// templates: tojson options, namespace, loop variables, strftime_now, items.
func TestTemplateFeatures(t *testing.T) {
	old := nowFunc
	nowFunc = func() time.Time { return time.Date(2026, 3, 5, 14, 7, 9, 0, time.UTC) }
	defer func() { nowFunc = old }()
	tests := []struct{ name, src, want string }{
		{"tojson default", `{{ tools[0] | tojson }}`, `{"b": 1, "a": [1.5, "é\n", null, true]}`},
		{"tojson indent", `{{ tools[0] | tojson(indent=2) }}`, "{\n  \"b\": 1,\n  \"a\": [\n    1.5,\n    \"é\\n\",\n    null,\n    true\n  ]\n}"},
		{"tojson sort_keys", `{{ tools[0] | tojson(sort_keys=true) }}`, `{"a": [1.5, "é\n", null, true], "b": 1}`},
		{"tojson separators", `{{ tools[0] | tojson(separators=(',', ':')) }}`, `{"b":1,"a":[1.5,"é\n",null,true]}`},
		{"tojson ensure_ascii", `{{ tools[0].a | tojson(ensure_ascii=true) }}`, `[1.5, "\u00e9\n", null, true]`},
		{"tojson string", `{{ messages[0].content | tojson }}`, `"a<b>&'\"c\\"`},
		{"namespace", `{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}{{ ns.n }}`, "2"},
		{"loop", `{% for m in messages %}{{ loop.index0 }}{{ loop.first }}{{ loop.last }};{% endfor %}`, "0TrueFalse;1FalseTrue;"},
		{"reverse slice", `{% for m in messages[::-1] %}{{ m.role }}{% endfor %}`, "assistantuser"},
		{"string methods", `{{ messages[1].content.split('</think>')[-1].lstrip('\n') }}|{{ messages[1].content.startswith('<think>') }}`, "ok|True"},
		{"strftime_now", `{{ strftime_now('%d %b %Y %H:%M') }}`, "05 Mar 2026 14:07"},
		{"items", `{% for k, v in tools[1].items() %}{{ k }}={{ v }};{% endfor %}`, "x=1;"},
		{"is defined", `{{ messages[0].tool_calls is defined }}{{ messages[0].role is defined }}`, "FalseTrue"},
		{"trim and lstrip blocks", "  {% if true %}\nx\n  {% endif %}\ny", "x\ny"},
		{"trailing newline dropped", "x\n", "x"},
		{"bos token", `{{ bos_token }}{{ eos_token }}`, "<s></s>"},
		// Added for the Gemma 3, Mistral and Llama 3.1 templates (jinjarewrite.go, jinja.go).
		{"conditional in parentheses", `{% for m in messages %}{{ '<' + m.role + '>' + ('first ' if loop.first else "") + m.content[:1] }}{% endfor %}`, "<user>first a<assistant><"},
		{"conditional as argument, list item, dict value", `{{ [1 if false else 2, 3] | join(',') }}|{{ {'k': 'v' if messages else 'w'}['k'] }}|{{ ('x' if true else 'y') | upper }}`, "2,3|v|X"},
		{"conditional branch not taken is not evaluated", `{{ (messages[9].content[0] if false else 'safe') }}`, "safe"},
		{"conditional text in a string untouched", `{{ "(a if b else c)" }}`, "(a if b else c)"},
		{"negative index of a one-item list", `{% set u = messages | selectattr('role', 'equalto', 'user') | list %}{{ u[-1].role }}{{ u[-1] == messages[0] }}{{ messages[-2].role }}{{ 'ab'[-2] }}`, "userTrueusera"},
		{"items keys values in key order", `{% for k, v in tools[0].items() %}{{ k }}={{ v | tojson }};{% endfor %}{{ tools[0].keys() | list | join(',') }}|{{ tools[0].values() | list | length }}`, `b=1;a=[1.5, "é\n", null, true];b,a|2`},
		{"items filter in key order", `{% for k, v in tools[0] | items %}{{ k }};{% endfor %}{% for k, v in {'z': 1, 'y': 2} | items %}{{ k }}{% endfor %}`, "b;a;zy"},
		{"is iterable on a string", `{{ messages[0].content is iterable }}{{ messages[0].content is mapping }}{{ tools[0] is mapping }}`, "TrueFalseTrue"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := &Tokenizer{name: "features", chatTemplate: tt.src, bosText: "<s>", eosText: "</s>", pad: -1, unk: -1}
			msgs := []Message{{Role: "user", Content: `a<b>&'"c\`}, {Role: "assistant", Content: "<think>\nx\n</think>\n\nok"}}
			tools := []json.RawMessage{json.RawMessage(`{"b": 1, "a": [1.5, "é\n", null, true]}`), json.RawMessage(`{"x": 1}`)}
			got, err := tk.ApplyChatTemplate(msgs, tools, false)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPyFloat(t *testing.T) {
	// want = repr(float(x)) in Python.
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0.0"}, {1, "1.0"}, {0.5, "0.5"}, {-2.25, "-2.25"}, {0.1, "0.1"}, {1e16, "1e+16"}, {1e15, "1000000000000000.0"},
		{123456789.125, "123456789.125"}, {1e-4, "0.0001"}, {1e-5, "1e-05"}, {1.5e-7, "1.5e-07"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
		{3.14159, "3.14159"}, {2.5e20, "2.5e+20"},
	}
	for _, tt := range tests {
		if got := pyFloat(tt.in); got != tt.want {
			t.Errorf("pyFloat(%v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzChatTemplate: arbitrary template sources and message text never panic.
func FuzzChatTemplate(f *testing.F) {
	f.Add("{% for m in messages %}{{ m.role + m.content }}{% endfor %}", "hi")
	f.Add("{{ tools | tojson }}{{ raise_exception(messages[0].content) }}", "boom")
	f.Add("{% set ns = namespace(a=1) %}{{ ns.a ~ messages[-1].content[::-1] }}", "x")
	f.Add("{% for", "")
	f.Fuzz(func(t *testing.T, src, content string) {
		if len(src) > 2000 || strings.Contains(src, "range") {
			return // range(...) with huge bounds is slow, not wrong
		}
		tk := &Tokenizer{name: "fuzz", chatTemplate: src, pad: -1, unk: -1}
		done := make(chan struct{})
		go func() {
			defer close(done)
			tk.ApplyChatTemplate([]Message{{Role: "user", Content: content}}, []json.RawMessage{json.RawMessage(`{"a": 1}`)}, true)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("template %q hangs", src)
		}
	})
}

// TestObservationPrefixMethods covers both ways of finding the prefix to cut:
// veRL's [{}] probe, and the lone-turn common prefix when the probe renders a
// turn; and templates that reject a lone assistant turn.
func TestObservationPrefixMethods(t *testing.T) {
	const sys = "{% if messages[0].role != 'system' %}<s>SYS</s>\n{% endif %}"
	tests := []struct {
		name, src string
		want      string
	}{
		{"probe", sys + "{% for m in messages %}{% if m.role %}<{{ m.role }}>{{ m.content }}\n{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
			"<tool>r\n<assistant>"},
		{"lone-turn prefix", sys + "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
			"<tool>r\n<assistant>"},
		{"assistant first raises", "{% if messages[0].role == 'assistant' %}{{ raise_exception('user first') }}{% endif %}" + sys +
			"{% for m in messages %}{% if m.role %}<{{ m.role }}>{{ m.content }}\n{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
			"<tool>r\n<assistant>"},
		{"kwargs reach the template", "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{{ extra }}", "<tool>rX"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := &Tokenizer{name: "obs", chatTemplate: tt.src, pad: -1, unk: -1}
			got, err := tk.RenderObservationKwargs([]Message{{Role: "tool", Content: "r"}}, map[string]any{"extra": "X"})
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	tk := &Tokenizer{name: "obs", chatTemplate: "x", pad: -1, unk: -1}
	if _, err := tk.ApplyChatTemplateKwargs(nil, nil, true, map[string]any{"messages": 1}); err == nil {
		t.Error("kwarg messages accepted")
	}
}

// TestSetChatTemplate: a template set by the caller (a base model's, whose GGUF carries
// none) replaces the model's for prompts and observations, names its origin, and one that
// does not parse is refused naming it; before, the model without a template says how to
// give one.
func TestSetChatTemplate(t *testing.T) {
	tk := &Tokenizer{name: "base.gguf", bosText: "<bos>", eosText: "<eos>", pad: -1, unk: -1}
	msgs := []Message{{Role: "user", Content: "What is 2+2?"}}
	if _, err := tk.ApplyChatTemplate(msgs, nil, true); err == nil || !strings.Contains(err.Error(), "custom_chat_template") {
		t.Fatalf("no template: %v, want an error that names custom_chat_template", err)
	}
	const gemma = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ 'model' if m.role == 'assistant' else m.role }}\n" +
		"{{ m.content | trim }}<end_of_turn>\n{% endfor %}{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
	tk = &Tokenizer{name: "base.gguf", bosText: "<bos>", eosText: "<eos>", pad: -1, unk: -1}
	if err := tk.SetChatTemplate(gemma, "the config's template"); err != nil {
		t.Fatal(err)
	}
	got, err := tk.ApplyChatTemplate(msgs, nil, true)
	if want := "<bos><start_of_turn>user\nWhat is 2+2?<end_of_turn>\n<start_of_turn>model\n"; err != nil || got != want {
		t.Errorf("rendered %q (%v), want %q", got, err, want)
	}
	if tk.ChatTemplateOrigin() != "the config's template" || tk.ChatTemplate() != gemma {
		t.Errorf("origin %q, template %q", tk.ChatTemplateOrigin(), tk.ChatTemplate())
	}
	if err := tk.SetChatTemplate("{% for m in messages %}", "the config's template"); err == nil || !strings.Contains(err.Error(), "the config's template") {
		t.Errorf("a template that does not parse: %v, want an error naming its origin", err)
	}
}
