package chatserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/host/rollout"
)

// smolTokenizer loads the default model's tokenizer ($RLHOST_MODEL or models/ at the repo root).
func smolTokenizer(t testing.TB) *tokenizer.Tokenizer {
	t.Helper()
	p := os.Getenv("RLHOST_MODEL")
	if p == "" {
		p = filepath.Join("..", "..", "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
	}
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the default model is missing at %s (make model)", p)
		}
		t.Skipf("the default model is missing at %s: run `make model`", p)
	}
	tk, err := tokenizer.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tk.Close() })
	return tk
}

// scripted answers the k-th call with texts[k] (the last one repeated) followed by the
// end-of-turn token, with log-prob -0.25 per token, and records what it was asked.
type scripted struct {
	tk    *tokenizer.Tokenizer
	texts []string
	mu    sync.Mutex
	calls []rollout.SamplingParams
}

func (s *scripted) Generate(_ context.Context, prompt []int, p rollout.SamplingParams) (rollout.Generation, error) {
	s.mu.Lock()
	k := len(s.calls)
	s.calls = append(s.calls, p)
	s.mu.Unlock()
	ids := append(s.tk.Encode(s.texts[min(k, len(s.texts)-1)], false), s.tk.EOS())
	reason := "stop"
	if len(ids) > p.MaxTokens {
		ids, reason = ids[:p.MaxTokens], "length"
	}
	lp := make([]float32, len(ids))
	for i := range lp {
		lp[i] = -0.25
	}
	return rollout.Generation{Tokens: ids, Logprobs: lp, FinishReason: reason}, nil
}

func newServer(t testing.TB, texts ...string) (*Server, *scripted) {
	tk := smolTokenizer(t)
	p := &scripted{tk: tk, texts: texts}
	s := New(p, tk, Options{MaxContext: 2048})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, p
}

func post(t testing.TB, url, key, body string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("response is not JSON: %v: %s", err, b)
	}
	return resp.StatusCode, m
}

const calcTool = `{"type": "function", "function": {"name": "calc", "description": "Evaluate an arithmetic expression",
 "parameters": {"type": "object", "properties": {"expr": {"type": "string"}}, "required": ["expr"]}}}`

func TestErrors(t *testing.T) {
	s, _ := newServer(t, "hi")
	sess, _ := s.Open("traj-0", rollout.SamplingParams{MaxTokens: 16})
	ok := `{"messages": [{"role": "user", "content": "hi"}]}`
	closed, _ := s.Open("traj-1", rollout.SamplingParams{MaxTokens: 16})
	closed.Close()
	for _, tc := range []struct {
		name, url, key, body string
		status               int
		msg                  string
	}{
		{"unknown key", s.URL() + "/v1/chat/completions", "rlh-nope", ok, 401, "unknown or closed trajectory key"},
		{"no key", s.URL() + "/v1/chat/completions", "", ok, 401, "unknown"},
		{"closed key", s.URL() + "/v1/chat/completions", closed.APIKey(), ok, 401, "unknown"},
		{"unknown path key", s.URL() + "/t/rlh-nope/v1/chat/completions", "", ok, 401, "unknown"},
		{"malformed JSON", s.URL() + "/v1/chat/completions", sess.APIKey(), `{"messages": [`, 400, "not valid JSON"},
		{"no messages", s.URL() + "/v1/chat/completions", sess.APIKey(), `{}`, 400, "messages is empty"},
		{"bad role", s.URL() + "/v1/chat/completions", sess.APIKey(), `{"messages": [{"role": "robot", "content": "x"}]}`, 400, `messages[0]: unknown role "robot"`},
		{"bad content", s.URL() + "/v1/chat/completions", sess.APIKey(), `{"messages": [{"role": "user", "content": 3}]}`, 400, "messages[0].content"},
		{"bad arguments", s.URL() + "/v1/chat/completions", sess.APIKey(), `{"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "calc", "arguments": "{nope"}}]}]}`, 400, "messages[0].tool_calls[0].function.arguments"},
		{"bad tool", s.URL() + "/v1/chat/completions", sess.APIKey(), `{"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "x"}]}`, 400, "tools[0]"},
		{"stream with a bad field", s.URL() + "/v1/chat/completions", sess.APIKey(), `{"messages": [{"role": "user", "content": "x"}], "stream": true, "n": 0}`, 400, "n must be"},
		{"bad n", s.URL() + "/v1/chat/completions", sess.APIKey(), `{"messages": [{"role": "user", "content": "x"}], "n": 0}`, 400, "n must be"},
		{"bad temperature", s.URL() + "/v1/chat/completions", sess.APIKey(), `{"messages": [{"role": "user", "content": "x"}], "temperature": 9}`, 400, "temperature"},
		{"bad stop", s.URL() + "/v1/chat/completions", sess.APIKey(), `{"messages": [{"role": "user", "content": "x"}], "stop": 5}`, 400, "stop must be"},
		{"bad max_tokens", s.URL() + "/v1/chat/completions", sess.APIKey(), `{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}`, 400, "max_tokens"},
		{"no route", s.URL() + "/v2/chat", sess.APIKey(), ok, 404, "no route"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, m := post(t, tc.url, tc.key, tc.body)
			if status != tc.status {
				t.Fatalf("status %d, want %d (%v)", status, tc.status, m)
			}
			e, _ := m["error"].(map[string]any)
			if msg, _ := e["message"].(string); !strings.Contains(msg, tc.msg) || !strings.HasPrefix(msg, "chatserver: ") {
				t.Fatalf("error %q, want it to contain %q", msg, tc.msg)
			}
		})
	}
	if len(sess.Calls()) != 0 {
		t.Fatalf("rejected requests were recorded: %d calls", len(sess.Calls()))
	}
}

// TestConversation drives a tool-calling conversation as the openai client sends it and checks
// that the second prompt extends the first call's prompt + completion token for token, and that
// the trajectory built from the calls has the exact tokens, mask and log-probs.
func TestConversation(t *testing.T) {
	toolText := "<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"3+69\"}}\n</tool_call>"
	s, pol := newServer(t, toolText, "The answer is 72.")
	tk := s.tk
	sess, _ := s.Open("traj-0", rollout.SamplingParams{MaxTokens: 64, Temperature: 1, Seed: 7})
	first := `{"model": "policy", "messages": [{"role": "system", "content": "Use the calculator."},
	  {"role": "user", "content": "Tom has 3 apples and buys 69 more. How many?"}], "tools": [` + calcTool + `], "logprobs": true}`
	status, m := post(t, sess.BaseURL()+"/chat/completions", "", first) // key in the base URL
	if status != 200 {
		t.Fatalf("status %d: %v", status, m)
	}
	ch := m["choices"].([]any)[0].(map[string]any)
	if ch["finish_reason"] != "tool_calls" {
		t.Fatalf("finish_reason %v, want tool_calls", ch["finish_reason"])
	}
	msg := ch["message"].(map[string]any)
	tcs := msg["tool_calls"].([]any)
	fn := tcs[0].(map[string]any)["function"].(map[string]any)
	if fn["name"] != "calc" || fn["arguments"] != `{"expr": "3+69"}` {
		t.Fatalf("tool call %v", fn)
	}
	if msg["content"] != nil {
		t.Fatalf("content %q, want null beside the tool call", msg["content"])
	}
	lps := ch["logprobs"].(map[string]any)["content"].([]any)
	if len(lps) != len(ch["token_ids"].([]any)) || lps[0].(map[string]any)["logprob"].(float64) != -0.25 {
		t.Fatalf("logprobs %v", lps[:1])
	}
	// The client sends the conversation back with the assistant message as it got it (arguments
	// re-serialised with other spacing) and the tool's answer.
	callID := tcs[0].(map[string]any)["id"].(string)
	second := `{"messages": [{"role": "system", "content": "Use the calculator."},
	  {"role": "user", "content": "Tom has 3 apples and buys 69 more. How many?"},
	  {"role": "assistant", "content": null, "tool_calls": [{"id": "` + callID + `", "type": "function", "function": {"name": "calc", "arguments": "{\"expr\":\"3+69\"}"}}]},
	  {"role": "tool", "tool_call_id": "` + callID + `", "content": "72"}], "tools": [` + calcTool + `], "temperature": 0.5, "max_tokens": 1000}`
	status, m = post(t, s.URL()+"/v1/chat/completions", sess.APIKey(), second) // key in the header
	if status != 200 {
		t.Fatalf("status %d: %v", status, m)
	}
	ch = m["choices"].([]any)[0].(map[string]any)
	if got := ch["message"].(map[string]any)["content"]; got != "The answer is 72." || ch["finish_reason"] != "stop" {
		t.Fatalf("second reply %v / %v", got, ch["finish_reason"])
	}
	if pol.calls[1].Temperature != 0.5 || pol.calls[0].Temperature != 1 || pol.calls[0].MaxTokens != 64 {
		t.Fatalf("sampling %+v", pol.calls)
	}
	calls := sess.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d calls recorded, want 2", len(calls))
	}
	c0, c1 := calls[0], calls[1]
	if want := 64 - (len(c1.PromptIDs) - len(c0.PromptIDs)); pol.calls[1].MaxTokens != want {
		t.Fatalf("second call's max tokens %d, want the %d left of the trajectory's budget", pol.calls[1].MaxTokens, want)
	}
	prefix := append(slices.Clone(c0.PromptIDs), c0.CompletionIDs...)
	if !slices.Equal(c1.PromptIDs[:len(prefix)], prefix) {
		t.Fatal("the second prompt does not extend the first prompt + completion")
	}
	obs, err := tk.RenderObservation([]tokenizer.Message{{Role: "tool", Content: "72", ToolCallID: callID}})
	if err != nil {
		t.Fatal(err)
	}
	if want := tk.Encode(obs, false); !slices.Equal(c1.PromptIDs[len(prefix):], want) {
		t.Fatalf("observation tokens %v, want %v", c1.PromptIDs[len(prefix):], want)
	}
	full, _ := tk.ApplyChatTemplate([]tokenizer.Message{{Role: "system", Content: "Use the calculator."},
		{Role: "user", Content: "Tom has 3 apples and buys 69 more. How many?"}}, []json.RawMessage{json.RawMessage(calcTool)}, true)
	if !slices.Equal(c0.PromptIDs, tk.Encode(full, false)) {
		t.Fatal("the first prompt is not the chat template's rendering")
	}
	out := rollout.BuildExternal(calls, 0)
	if !slices.Equal(out.PromptIDs, c0.PromptIDs) || out.AssistantTurns != 2 || out.UserTurns != 1 || out.ToolCalls != 1 {
		t.Fatalf("trajectory: prompt %d tokens, %d assistant turns, %d user turns, %d tool calls", len(out.PromptIDs), out.AssistantTurns, out.UserTurns, out.ToolCalls)
	}
	n0, nObs, n1 := len(c0.CompletionIDs), len(c1.PromptIDs)-len(prefix), len(c1.CompletionIDs)
	if len(out.ResponseIDs) != n0+nObs+n1 {
		t.Fatalf("response %d tokens, want %d", len(out.ResponseIDs), n0+nObs+n1)
	}
	for i, x := range out.ResponseMask {
		want, wantLP := float32(0), float32(0)
		if i < n0 || i >= n0+nObs {
			want, wantLP = 1, -0.25
		}
		if x != want || out.ResponseLogprobs[i] != wantLP {
			t.Fatalf("token %d: mask %v logprob %v, want %v %v", i, x, out.ResponseLogprobs[i], want, wantLP)
		}
	}
}

// TestRestartedConversation: a request that does not continue an earlier call is rendered
// whole, and only the last chain is trained on.
func TestRestartedConversation(t *testing.T) {
	s, _ := newServer(t, "one", "two")
	sess, _ := s.Open("traj-0", rollout.SamplingParams{MaxTokens: 16})
	for _, q := range []string{"first question", "second question"} {
		if st, m := post(t, sess.BaseURL()+"/chat/completions", "", `{"messages": [{"role": "user", "content": "`+q+`"}]}`); st != 200 {
			t.Fatalf("status %d: %v", st, m)
		}
	}
	calls := sess.Calls()
	out := rollout.BuildExternal(calls, 0)
	if !slices.Equal(out.PromptIDs, calls[1].PromptIDs) || !slices.Equal(out.ResponseIDs, calls[1].CompletionIDs) || out.AssistantTurns != 1 {
		t.Fatalf("trajectory is not the last call alone: %d assistant turns", out.AssistantTurns)
	}
}

// TestBudget: a conversation that has used the trajectory's response budget is refused.
func TestBudget(t *testing.T) {
	s, _ := newServer(t, "one two")
	sess, _ := s.Open("traj-0", rollout.SamplingParams{MaxTokens: 8})
	if st, m := post(t, sess.BaseURL()+"/chat/completions", "", `{"messages": [{"role": "user", "content": "x"}]}`); st != 200 {
		t.Fatalf("status %d: %v", st, m)
	}
	long := strings.Repeat("more words ", 20)
	st, m := post(t, sess.BaseURL()+"/chat/completions", "", `{"messages": [{"role": "user", "content": "x"}, {"role": "assistant", "content": "one two"}, {"role": "user", "content": "`+long+`"}]}`)
	if e, _ := m["error"].(map[string]any); st != 400 || !strings.Contains(e["message"].(string), "response budget of 8 tokens") {
		t.Fatalf("status %d: %v", st, m)
	}
}

func TestStopAndN(t *testing.T) {
	s, pol := newServer(t, "alpha beta END gamma delta")
	sess, _ := s.Open("traj-0", rollout.SamplingParams{MaxTokens: 32, Seed: 1})
	st, m := post(t, sess.BaseURL()+"/chat/completions", "", `{"messages": [{"role": "user", "content": "x"}], "stop": ["END"], "n": 3}`)
	if st != 200 {
		t.Fatalf("status %d: %v", st, m)
	}
	chs := m["choices"].([]any)
	if len(chs) != 3 {
		t.Fatalf("%d choices, want 3", len(chs))
	}
	for _, c := range chs {
		c := c.(map[string]any)
		if got := c["message"].(map[string]any)["content"]; got != "alpha beta " || c["finish_reason"] != "stop" {
			t.Fatalf("content %q finish %v", got, c["finish_reason"])
		}
	}
	seeds := map[uint64]bool{}
	for _, c := range pol.calls {
		seeds[c.Seed] = true
	}
	if len(seeds) != 3 {
		t.Fatalf("the 3 choices share seeds: %v", pol.calls)
	}
	calls := sess.Calls()
	if len(calls) != 3 || calls[2].Choice != 2 {
		t.Fatalf("calls %d", len(calls))
	}
	if text := s.tk.Decode(calls[0].CompletionIDs, true); !strings.HasSuffix(text, "END") || len(calls[0].Logprobs) != len(calls[0].CompletionIDs) {
		t.Fatalf("recorded completion %q (%d log-probs)", text, len(calls[0].Logprobs))
	}
}

// FuzzRequest: any body gets a JSON answer of 200 or 400, never a panic.
func FuzzRequest(f *testing.F) {
	for _, seed := range []string{
		`{"messages": [{"role": "user", "content": "hi"}]}`,
		`{"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}], "stop": "x", "n": 2, "logprobs": true}`,
		`{"messages": [{"role": "assistant", "content": null, "tool_calls": [{"id": "a", "type": "function", "function": {"name": "calc", "arguments": {"x": 1}}}]}, {"role": "tool", "content": "1"}], "tools": [` + calcTool + `]}`,
		`{"messages": [`, `null`, `[]`, `{"messages": [{}]}`, `{"max_tokens": -1, "messages": [{"role": "user"}]}`,
	} {
		f.Add([]byte(seed))
	}
	s, _ := newServer(f, "<tool_call>{\"name\": \"calc\", \"arguments\": {}}</tool_call>")
	sess, _ := s.Open("fuzz", rollout.SamplingParams{MaxTokens: 8})
	f.Fuzz(func(t *testing.T, body []byte) {
		resp, err := http.Post(sess.BaseURL()+"/chat/completions", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 && resp.StatusCode != 400 {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		if !json.Valid(b) {
			t.Fatalf("not JSON: %s", b)
		}
	})
}

// Replies are parsed in the server's tool-call format: Mistral's [TOOL_CALLS] list, with the
// model's id kept (or a 9-character one), the text before it as the content; Llama 3's JSON.
func TestToolFormats(t *testing.T) {
	for _, tt := range []struct {
		name    string
		format  tokenizer.ToolFormat
		reply   string
		id      string
		content any
	}{
		{"mistral with id", tokenizer.ToolFormatMistral, `Let me compute.[TOOL_CALLS][{"name": "calc", "arguments": {"expr": "3+69"}, "id": "a1b2c3d4e"}]`, "a1b2c3d4e", "Let me compute."},
		{"mistral without id", tokenizer.ToolFormatMistral, `[TOOL_CALLS] [{"name": "calc", "arguments": {"expr": "3+69"}}]`, "c00000000", nil},
		{"llama3_json", tokenizer.ToolFormatLlama3JSON, `<|python_tag|>{"name": "calc", "parameters": {"expr": "3+69"}}`, "call_0_0_0", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tk := smolTokenizer(t)
			s := New(&scripted{tk: tk, texts: []string{tt.reply}}, tk, Options{MaxContext: 2048, ToolFormat: tt.format})
			if err := s.Start(); err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sess, _ := s.Open("traj-f", rollout.SamplingParams{MaxTokens: 64, Temperature: 1, Seed: 7})
			status, m := post(t, sess.BaseURL()+"/chat/completions", "", `{"messages": [{"role": "user", "content": "3+69?"}], "tools": [`+calcTool+`]}`)
			if status != 200 {
				t.Fatalf("status %d: %v", status, m)
			}
			ch := m["choices"].([]any)[0].(map[string]any)
			msg := ch["message"].(map[string]any)
			tcs, _ := msg["tool_calls"].([]any)
			if ch["finish_reason"] != "tool_calls" || len(tcs) != 1 {
				t.Fatalf("reply %v", ch)
			}
			tc := tcs[0].(map[string]any)
			fn := tc["function"].(map[string]any)
			if fn["name"] != "calc" || fn["arguments"] != `{"expr": "3+69"}` || tc["id"] != tt.id {
				t.Errorf("tool call %v", tc)
			}
			if msg["content"] != tt.content {
				t.Errorf("content %#v, want %#v", msg["content"], tt.content)
			}
		})
	}
}
