package chatserver

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/host/rollout"
)

// readSSE returns the data of each event of a text/event-stream answer.
func readSSE(t *testing.T, url, key, body string) []string {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			events = append(events, d)
		} else if sc.Text() != "" {
			t.Fatalf("not an SSE line: %q", sc.Text())
		}
	}
	return events
}

// A streamed completion carries the same content, tool calls, log-probs, finish reason and
// usage as the unstreamed one, in chat.completion.chunk events ending with [DONE].
func TestStream(t *testing.T) {
	const text = `Let me compute. <tool_call>{"name": "calc", "arguments": {"expr": "6*7"}}</tool_call>`
	s, _ := newServer(t, text)
	body := `{"messages": [{"role": "user", "content": "6*7?"}], "tools": [` + calcTool + `], "logprobs": true, "n": 2`
	plain, _ := s.Open("traj-0", rollout.SamplingParams{MaxTokens: 64, Seed: 5})
	st, want := post(t, plain.BaseURL()+"/chat/completions", "", body+`}`)
	if st != 200 {
		t.Fatalf("status %d: %v", st, want)
	}
	sess, _ := s.Open("traj-1", rollout.SamplingParams{MaxTokens: 64, Seed: 5})
	events := readSSE(t, s.URL()+"/v1/chat/completions", sess.APIKey(), body+`, "stream": true, "stream_options": {"include_usage": true}}`)
	if len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("events %q", events)
	}
	type acc struct {
		role, content string
		logprobs      []any
		calls         []any
		finish        any
	}
	got := map[int]*acc{}
	var usage any
	for _, e := range events[:len(events)-1] {
		var c map[string]any
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("event %q: %v", e, err)
		}
		if c["object"] != "chat.completion.chunk" || c["id"] == "" || c["model"] != "policy" {
			t.Fatalf("chunk %v", c)
		}
		if u, ok := c["usage"]; ok {
			usage = u
		}
		for _, ch := range c["choices"].([]any) {
			ch := ch.(map[string]any)
			i := int(ch["index"].(float64))
			if got[i] == nil {
				got[i] = &acc{}
			}
			a := got[i]
			d := ch["delta"].(map[string]any)
			if r, ok := d["role"].(string); ok {
				a.role = r
			}
			if c, ok := d["content"].(string); ok {
				a.content += c
			}
			if tc, ok := d["tool_calls"].([]any); ok {
				a.calls = append(a.calls, tc...)
			}
			if lp, ok := ch["logprobs"].(map[string]any); ok {
				a.logprobs = append(a.logprobs, lp["content"].([]any)...)
			}
			if ch["finish_reason"] != nil {
				a.finish = ch["finish_reason"]
			}
		}
	}
	for i, wc := range want["choices"].([]any) {
		wc := wc.(map[string]any)
		a := got[i]
		if a == nil {
			t.Fatalf("choice %d missing from the stream", i)
		}
		msg := wc["message"].(map[string]any)
		if a.role != "assistant" || a.content != msg["content"] || a.finish != wc["finish_reason"] || a.finish != "tool_calls" {
			t.Errorf("choice %d: streamed %+v, want %v", i, a, wc)
		}
		var calls []any
		for _, c := range a.calls {
			c := c.(map[string]any)
			delete(c, "index")
			calls = append(calls, c)
		}
		if !reflect.DeepEqual(calls, msg["tool_calls"]) {
			t.Errorf("choice %d: streamed tool calls %v, want %v", i, calls, msg["tool_calls"])
		}
		if !reflect.DeepEqual(a.logprobs, wc["logprobs"].(map[string]any)["content"]) || len(a.logprobs) == 0 {
			t.Errorf("choice %d: streamed log-probs differ (%d entries)", i, len(a.logprobs))
		}
	}
	if !reflect.DeepEqual(usage, want["usage"]) {
		t.Errorf("usage %v, want %v", usage, want["usage"])
	}
	if len(sess.Calls()) != 2 {
		t.Errorf("a streamed call records its %d choices", len(sess.Calls()))
	}
}

// The official openai Python client reads the stream (content, log-probs, finish reason).
func TestStreamOpenAIClient(t *testing.T) {
	py := os.Getenv("RLHOST_GENCHAT_PYTHON")
	must := py != ""
	if py == "" {
		home, _ := os.UserHomeDir()
		py = filepath.Join(home, ".cache", "rlhost", "genchat-venv", "bin", "python")
	}
	if _, err := os.Stat(py); err != nil {
		if must || os.Getenv("CI") != "" {
			t.Fatalf("the genchat Python is missing at %s (make setup-genchat)", py)
		}
		t.Skipf("the genchat Python is missing at %s: run `make setup-genchat`", py)
	}
	s, _ := newServer(t, "Paris is the capital of France.")
	sess, _ := s.Open("traj-0", rollout.SamplingParams{MaxTokens: 64, Seed: 3})
	const script = `
import json, sys, openai
c = openai.OpenAI(base_url=sys.argv[1], api_key=sys.argv[2])
text, lps, finish, usage = "", [], None, None
for ch in c.chat.completions.create(model="policy", messages=[{"role": "user", "content": "Capital of France?"}],
                                    stream=True, logprobs=True, stream_options={"include_usage": True}):
    if ch.usage is not None:
        usage = ch.usage.completion_tokens
    for c0 in ch.choices:
        text += c0.delta.content or ""
        if c0.logprobs is not None and c0.logprobs.content:
            lps += [x.logprob for x in c0.logprobs.content]
        finish = c0.finish_reason or finish
print(json.dumps({"text": text, "logprobs": lps, "finish": finish, "usage": usage}))
`
	out, err := exec.Command(py, "-c", script, sess.BaseURL(), sess.APIKey()).CombinedOutput()
	if err != nil {
		t.Fatalf("openai client: %v\n%s", err, out)
	}
	var r struct {
		Text     string
		Logprobs []float64
		Finish   string
		Usage    int
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	calls := sess.Calls()
	if len(calls) != 1 {
		t.Fatalf("%d calls recorded", len(calls))
	}
	if r.Text != "Paris is the capital of France." || r.Finish != "stop" || len(r.Logprobs) != len(calls[0].CompletionIDs) || r.Usage != len(calls[0].CompletionIDs) {
		t.Errorf("the openai client read %+v (completion of %d tokens)", r, len(calls[0].CompletionIDs))
	}
}
