package task

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeJSONKeepsIntegers(t *testing.T) {
	v, err := DecodeJSON(`{"i": 3, "f": 2.5, "big": 9007199254740993, "e": 1e3, "a": [1, "x", null, true], "o": {"n": -7}}`)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"i": int64(3), "f": 2.5, "big": int64(9007199254740993), "e": 1000.0,
		"a": []any{int64(1), "x", nil, true}, "o": map[string]any{"n": int64(-7)}}
	if !reflect.DeepEqual(v, want) {
		t.Fatalf("got %#v\nwant %#v", v, want)
	}
	for _, bad := range []string{`{"a":`, `{"a":1} {"b":2}`, `nope`} {
		if _, err := DecodeJSON(bad); err == nil {
			t.Errorf("DecodeJSON(%q) succeeded", bad)
		}
	}
	if _, err := DecodeObject(`[1]`); err == nil || !strings.Contains(err.Error(), "got an array") {
		t.Errorf("DecodeObject of an array: %v", err)
	}
	if m, err := DecodeObject(""); err != nil || len(m) != 0 {
		t.Errorf("DecodeObject of empty text: %v %v", m, err)
	}
}

func TestRowRoundTrip(t *testing.T) {
	row := Row{
		DataSource: "openai/gsm8k",
		Prompt: []Message{{Role: "system", Content: "s"}, {Role: "assistant", Content: "a",
			ToolCalls: []ToolCall{{ID: "c1", Name: "f", Arguments: json.RawMessage(`{"x":1}`)}}},
			{Role: "tool", Content: "r", ToolCallID: "c1", Name: "f"}},
		Ability:     "math",
		RewardModel: RewardModel{Style: "rule", GroundTruth: "72"},
		ExtraInfo:   map[string]any{"index": int64(4), "tools_kwargs": map[string]any{"f": map[string]any{"create_kwargs": map[string]any{"g": "<&>"}}}},
		AgentName:   "tool_agent",
	}
	back, err := rowFromProto(rowToProto(row))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, row) {
		t.Fatalf("round trip:\n%#v\n%#v", back, row)
	}
	if got := back.ToolsKwargs("f", "create_kwargs")["g"]; got != "<&>" {
		t.Errorf("ToolsKwargs = %v", got)
	}
	if back.Index() != 4 {
		t.Errorf("Index = %d", back.Index())
	}
}

type failTool struct{}

func (failTool) Spec() ToolSpec {
	return ToolSpec{Name: "fail", Parameters: SchemaObject("x", `{"type":"string"}`)}
}
func (failTool) Call(context.Context, ToolInvocation) (ToolOutput, error) {
	return ToolOutput{}, InvalidArgument("x is wrong")
}

type okTool struct{}

func (okTool) Spec() ToolSpec { return ToolSpec{Name: "ok", Parameters: SchemaObject()} }
func (okTool) Call(_ context.Context, c ToolInvocation) (ToolOutput, error) {
	return ToolOutput{Text: "got " + EncodeJSON(c.Arguments) + " with " + EncodeJSON(c.CreateKwargs), StepReward: 0.5}, nil
}

func TestToolEnvSemantics(t *testing.T) {
	ctx := context.Background()
	env := &ToolEnv{Tools: []Tool{failTool{}, okTool{}}}
	row := Row{ExtraInfo: map[string]any{"tools_kwargs": map[string]any{"ok": map[string]any{"create_kwargs": map[string]any{"k": "v"}}}}}
	st, err := env.Start(ctx, StartRequest{Row: row})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := env.Obs(ctx, ObsRequest{InstanceID: st.InstanceID, Kind: ObsTools, Assistant: Message{ToolCalls: []ToolCall{
		{ID: "1", Name: "ok", Arguments: json.RawMessage(`{"a":1}`)},
		{ID: "2", Name: "fail", Arguments: json.RawMessage(`{}`)},
		{ID: "3", Name: "nope", Arguments: json.RawMessage(`{}`)},
		{ID: "4", Name: "ok", Arguments: json.RawMessage(`{"a":`)},
		{ID: "5", Name: "ok", Arguments: json.RawMessage(`"str"`)},
		{ID: "6", Name: "ok"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		text string
		err  bool
	}{
		{`got {"a":1} with {"k":"v"}`, false},
		{"Error when executing tool: invalid argument: x is wrong", true},
		{`Error when executing tool: unknown tool "nope"`, true},
		{"Error when executing tool: arguments are not valid JSON", true},
		{"Error when executing tool: arguments must be a JSON object, got a string", true},
		{`got {} with {"k":"v"}`, false},
	}
	for i, w := range want {
		r := obs.ToolResults[i]
		if !strings.HasPrefix(r.Text, w.text) || r.Error != w.err || obs.Messages[i].ToolCallID != r.ToolCallID {
			t.Errorf("call %d: %+v; want %q error=%v", i, r, w.text, w.err)
		}
	}
	if obs.TurnReward != 1.0 {
		t.Errorf("turn reward %v, want 1.0 (two successful calls of 0.5)", obs.TurnReward)
	}
	if _, err := env.Obs(ctx, ObsRequest{InstanceID: st.InstanceID, Kind: ObsInteraction}); err == nil {
		t.Errorf("interaction without an Interaction succeeded")
	}
	if _, err := env.End(ctx, EndRequest{InstanceID: st.InstanceID}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.End(ctx, EndRequest{InstanceID: st.InstanceID}); err == nil {
		t.Errorf("second End succeeded")
	}
	if env.Running() != 0 {
		t.Errorf("running = %d", env.Running())
	}
}
