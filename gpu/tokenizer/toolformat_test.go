package tokenizer

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// callStrings renders calls as name+compact args (+"#"+id) for comparisons.
func callStrings(calls []ToolCall) []string {
	var out []string
	for _, c := range calls {
		var buf bytes.Buffer
		if err := json.Compact(&buf, c.Arguments); err != nil {
			buf.Reset()
			buf.Write(c.Arguments)
		}
		s := c.Name + buf.String()
		if c.ID != "" {
			s += "#" + c.ID
		}
		out = append(out, s)
	}
	return out
}

type parseCase struct {
	name    string
	text    string
	want    []string // name + compact args (+ #id)
	content string
	errWant string // substring of the one error; "" = none
}

func runParseCases(t *testing.T, f ToolFormat, tests []parseCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			calls, content, errs := ParseToolCalls(f, tt.text)
			if got := strings.Join(callStrings(calls), "|"); got != strings.Join(tt.want, "|") {
				t.Errorf("calls = %q, want %q", callStrings(calls), tt.want)
			}
			if content != tt.content {
				t.Errorf("content = %q, want %q", content, tt.content)
			}
			switch {
			case tt.errWant == "" && len(errs) > 0:
				t.Errorf("errors %v, want none", errs)
			case tt.errWant != "" && (len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.errWant)):
				t.Errorf("errors %v, want one containing %q", errs, tt.errWant)
			case len(errs) == 1 && !strings.HasPrefix(errs[0].Error(), "tokenizer: "):
				t.Errorf("error %q lacks the package prefix", errs[0])
			}
		})
	}
}

// TestParseLlama3ToolCalls: the cases of vLLM's llama3_json parser (tests/tool_use
// and the parser's code): the object as the whole message, after <|python_tag|>,
// text around it, several separated by ";", "arguments" for "parameters", and
// malformed turns that drop every call.
func TestParseLlama3ToolCalls(t *testing.T) {
	runParseCases(t, ToolFormatLlama3JSON, []parseCase{
		{"none", "The answer is 72.", nil, "The answer is 72.", ""},
		{"whole message", `{"name": "get_weather", "parameters": {"city": "Paris", "days": 2}}`, []string{`get_weather{"city":"Paris","days":2}`}, "", ""},
		{"python tag and eot", "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"x\": {\"y\": {\"z\": [1]}}}}<|eom_id|>", []string{`f{"x":{"y":{"z":[1]}}}`}, "", ""},
		{"arguments key", `{"name": "f", "arguments": {"a": 1}}`, []string{`f{"a":1}`}, "", ""},
		{"arguments wins over parameters", `{"name": "f", "parameters": {"p": 1}, "arguments": {"a": 1}}`, []string{`f{"a":1}`}, "", ""},
		{"text around", "Sure, calling it.\n{\"name\": \"f\", \"parameters\": {}}\nDone.", []string{`f{}`}, "Sure, calling it.", ""},
		{"several", `{"name": "f", "parameters": {"a": 1}}; {"name": "g", "parameters": {"b": "x;y"}} ;{"name": "h", "parameters": {}}`, []string{`f{"a":1}`, `g{"b":"x;y"}`, `h{}`}, "", ""},
		{"semicolon then text", `{"name": "f", "parameters": {}}; and more`, []string{`f{}`}, "", ""},
		{"partial json", `{"name": "f", "parameters": {"a": `, nil, `{"name": "f", "parameters": {"a": `, "not a JSON object"},
		{"no name", `{"parameters": {}}`, nil, `{"parameters": {}}`, `no "name"`},
		{"no parameters", `{"name": "f"}`, nil, `{"name": "f"}`, `has no "arguments" or "parameters"`},
		{"one bad drops all", `{"name": "f", "parameters": {}}; {"name": 3, "parameters": {}}`, nil, `{"name": "f", "parameters": {}}; {"name": 3, "parameters": {}}`, "tool call 1"},
		{"prose braces", "use {braces} here", nil, "use {braces} here", "not a JSON object"},
		{"string parameters kept", `{"name": "f", "parameters": "{\"x\": 1}"}`, []string{`f"{\"x\": 1}"`}, "", ""},
	})
}

// TestParseMistralToolCalls: vLLM's mistral parser cases: the JSON list with and
// without ids (v3/v7 and v2), text before [TOOL_CALLS], an end token after the
// list, the v11 name[CALL_ID]id[ARGS]{...} form, and malformed turns.
func TestParseMistralToolCalls(t *testing.T) {
	runParseCases(t, ToolFormatMistral, []parseCase{
		{"none", "Paris is sunny.", nil, "Paris is sunny.", ""},
		{"v3 with ids", `[TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}, "id": "a1b2c3d4e"}, {"name": "f", "arguments": {}, "id": "zzzzzzzz9"}]`,
			[]string{`get_weather{"city":"Paris"}#a1b2c3d4e`, `f{}#zzzzzzzz9`}, "", ""},
		{"v2 without ids, space, eos", `[TOOL_CALLS] [{"name": "f", "arguments": {"a": [1, {"b": 2}]}}]</s>`, []string{`f{"a":[1,{"b":2}]}`}, "", ""},
		{"text before", "Let me look.[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}]", []string{`f{}`}, "Let me look.", ""},
		{"token repeated", `[TOOL_CALLS][{"name": "f", "arguments": {}}][TOOL_CALLS]`, []string{`f{}`}, "", ""},
		{"no arguments", `[TOOL_CALLS][{"name": "f"}]`, nil, `[TOOL_CALLS][{"name": "f"}]`, `has no "arguments"`},
		{"partial json", `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1`, nil, `[TOOL_CALLS][{"name": "f", "arguments": {"a": 1`, "not a JSON list"},
		{"object not list", `[TOOL_CALLS]{"name": "f", "arguments": {}}`, nil, `[TOOL_CALLS]{"name": "f", "arguments": {}}`, "not a JSON list"},
		{"one bad drops all", `[TOOL_CALLS][{"name": "f", "arguments": {}}, {"arguments": {}}]`, nil, `[TOOL_CALLS][{"name": "f", "arguments": {}}, {"arguments": {}}]`, "call 1"},
		{"v11 with call id", `[TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]{"city": "Paris"}[TOOL_CALLS]f[ARGS]{}</s>`,
			[]string{`get_weather{"city":"Paris"}#a1b2c3d4e`, `f{}`}, "", ""},
		{"v11 brace form", "ok[TOOL_CALLS]add{\"a\": 3.5, \"b\": 4}", []string{`add{"a":3.5,"b":4}`}, "ok", ""},
		{"v11 bad args", `[TOOL_CALLS]f[ARGS]{"a":`, nil, `[TOOL_CALLS]f[ARGS]{"a":`, "arguments are not JSON"},
		{"v11 no args", `[TOOL_CALLS]f`, nil, `[TOOL_CALLS]f`, "no name followed by arguments"},
	})
}

func TestParseToolCallsHermesContent(t *testing.T) {
	runParseCases(t, ToolFormatHermes, []parseCase{
		{"none", "just text ", nil, "just text ", ""},
		{"content around", "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n", []string{`f{}`}, "Let me check.", ""},
	})
}

// TestFormatToolCalls: what each format writes is what its parser reads back,
// and the text is what the families' chat templates render for the same calls
// (the goldens check the templates; here the spacing and key order).
func TestFormatToolCalls(t *testing.T) {
	calls := []ToolCall{
		{Name: "get_weather", ID: "a1b2c3d4e", Arguments: json.RawMessage(`{"zeta":"東京","n":[1,2.5,null],"o":{"b":1,"a":"<x>"}}`)},
		{Name: "no_args", Arguments: nil},
	}
	want := map[ToolFormat]string{
		ToolFormatHermes: "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"zeta\": \"東京\", \"n\": [1, 2.5, null], \"o\": {\"b\": 1, \"a\": \"<x>\"}}}\n</tool_call>\n" +
			"<tool_call>\n{\"name\": \"no_args\", \"arguments\": {}}\n</tool_call>",
		ToolFormatLlama3JSON: `{"name": "get_weather", "parameters": {"zeta": "東京", "n": [1, 2.5, null], "o": {"b": 1, "a": "<x>"}}}; {"name": "no_args", "parameters": {}}`,
		ToolFormatMistral:    `[TOOL_CALLS][{"name": "get_weather", "arguments": {"zeta": "東京", "n": [1, 2.5, null], "o": {"b": 1, "a": "<x>"}}, "id": "a1b2c3d4e"}, {"name": "no_args", "arguments": {}}]`,
	}
	for _, f := range ToolFormats {
		text := FormatToolCalls(f, calls)
		if text != want[f] {
			t.Errorf("%s: wrote\n%s\nwant\n%s", f, text, want[f])
		}
		got, _, errs := ParseToolCalls(f, text)
		if len(errs) > 0 || len(got) != 2 || got[0].Name != "get_weather" || got[1].Name != "no_args" ||
			!sameJSON(t, got[0].Arguments, calls[0].Arguments) || string(got[1].Arguments) != "{}" {
			t.Errorf("%s: read back %+v, %v", f, got, errs)
		}
		if f == ToolFormatMistral && got[0].ID != "a1b2c3d4e" {
			t.Errorf("mistral: id %q not read back", got[0].ID)
		}
	}
}

func TestParseToolFormat(t *testing.T) {
	for _, s := range []string{"hermes", "llama3_json", "mistral", "auto"} {
		if f, err := ParseToolFormat(s); err != nil || string(f) != s {
			t.Errorf("ParseToolFormat(%q) = %q, %v", s, f, err)
		}
	}
	if _, err := ParseToolFormat("llama3"); err == nil || !strings.Contains(err.Error(), "llama3_json") {
		t.Errorf("unknown format: %v", err)
	}
}

// TestDetectToolFormat: the template's text decides, then the special tokens,
// then hermes.
func TestDetectToolFormat(t *testing.T) {
	tests := []struct {
		name, tmpl string
		tokens     []string
		want       ToolFormat
	}{
		{"qwen", "{{- '<tool_call>\\n{\"name\": \"' }}", []string{"[TOOL_CALLS]"}, ToolFormatHermes},
		{"mistral", `{{- "[TOOL_CALLS][" }}`, nil, ToolFormatMistral},
		{"llama 3.1", `{{- "<|python_tag|>" + tool_call.name }}`, nil, ToolFormatLlama3JSON},
		{"llama 3.2", `{{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}`, nil, ToolFormatLlama3JSON},
		{"mistral token", "{{ messages }}", []string{"[TOOL_CALLS]"}, ToolFormatMistral},
		{"llama token", "{{ messages }}", []string{"<|python_tag|>"}, ToolFormatLlama3JSON},
		{"smollm2", "{{ messages }}", []string{"<|im_start|>"}, ToolFormatHermes},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tk := &Tokenizer{chatTemplate: tt.tmpl, byContent: map[string]int{}}
			for i, s := range tt.tokens {
				tk.byContent[s] = i
			}
			got, why := tk.DetectToolFormat()
			if got != tt.want || why == "" {
				t.Errorf("DetectToolFormat = %s (%s), want %s", got, why, tt.want)
			}
		})
	}
}

// fuzzToolFormat checks what a parser returns on any text: calls with a name
// and valid JSON arguments, that written back in the format parse to the same calls.
func fuzzToolFormat(t *testing.T, f ToolFormat, s string) {
	calls, _, _ := ParseToolCalls(f, s)
	for _, c := range calls {
		if c.Name == "" || !json.Valid(c.Arguments) {
			t.Fatalf("bad call %+v from %q", c, s)
		}
	}
	if len(calls) == 0 {
		return
	}
	// Written back, invalid UTF-8 becomes U+FFFD, and a marker inside a name or
	// a string argument means something else: no round trip for those.
	if !utf8.ValidString(s) {
		return
	}
	for _, c := range calls {
		if strings.Contains(c.Name+c.ID+string(c.Arguments), "[TOOL_CALLS]") {
			return
		}
	}
	again, _, errs := ParseToolCalls(f, FormatToolCalls(f, calls))
	if len(errs) > 0 || strings.Join(callStrings(again), "|") != strings.Join(callStrings(calls), "|") {
		t.Fatalf("%s round trip of %q: %q, %v; want %q", f, s, callStrings(again), errs, callStrings(calls))
	}
}

func FuzzParseLlama3ToolCalls(f *testing.F) {
	f.Add(`{"name": "f", "parameters": {"x": 1}}`)
	f.Add("<|python_tag|>{\"name\": \"f\", \"arguments\": {}}; {\"name\": \"g\", \"parameters\": [1]}<|eom_id|>")
	f.Add(`text {"name": "f", "parameters": {"a": {"b": {"c": "}"}}}} ; {`)
	f.Add(`{"name": "f", "parameters": {}, "name": "g"}`)
	f.Fuzz(func(t *testing.T, s string) { fuzzToolFormat(t, ToolFormatLlama3JSON, s) })
}

func FuzzParseMistralToolCalls(f *testing.F) {
	f.Add(`[TOOL_CALLS][{"name": "f", "arguments": {"x": 1}, "id": "abcdefghi"}]`)
	f.Add(`pre[TOOL_CALLS] [{"name": "f", "arguments": "s"}]</s>`)
	f.Add(`[TOOL_CALLS]f[CALL_ID]abc[ARGS]{"a": 1}[TOOL_CALLS]g{}`)
	f.Add(`[TOOL_CALLS][{"name": "f", "arguments": {}}] [{"name": 1}]`)
	f.Fuzz(func(t *testing.T, s string) { fuzzToolFormat(t, ToolFormatMistral, s) })
}
