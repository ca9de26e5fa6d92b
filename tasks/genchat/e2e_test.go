package genchat_test

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/host/chatserver"
	"github.com/rlhost/rlhost/host/chatserver/chatservertest"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/tasks/genchat"
)

// need skips (or, under CI, fails) when a prerequisite that `make setup-genchat model` installs
// is missing.
func need(t *testing.T, what, path string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is missing at %s (make setup-genchat model)", what, path)
		}
		t.Skipf("%s is missing at %s: run `make setup-genchat model`", what, path)
	}
}

// startEnv runs examples/genchat-env with the venv's Python and returns its URL.
func startEnv(t *testing.T, args ...string) string {
	t.Helper()
	py := os.Getenv("RLHOST_GENCHAT_PYTHON")
	if py == "" {
		home, _ := os.UserHomeDir()
		py = filepath.Join(home, ".cache", "rlhost", "genchat-venv", "bin", "python")
	}
	need(t, "the genchat environment's Python (with openai)", py)
	cmd := exec.Command(py, append([]string{filepath.Join("..", "..", "examples", "genchat-env", "genchat_env.py"), "--port", "0"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(out)
		s.Scan()
		line <- s.Text()
	}()
	select {
	case l := <-line:
		url, ok := strings.CutPrefix(l, "LISTENING ")
		if !ok {
			t.Fatalf("the environment said %q", l)
		}
		return url
	case <-time.After(60 * time.Second):
		t.Fatal("the environment did not start within 60 s")
	}
	return ""
}

// TestEndToEnd drives two trajectories of the real default model through the chat server, the
// gen_chat plugin and the Python environment (openai client, calculator tool), then checks the
// trajectories token for token: the recorded log-probs of every model token equal the model's
// own log-probs of that token in the assembled sequence (temperature 1), so what is trained on
// is exactly what was sampled, observations included as context.
func TestEndToEnd(t *testing.T) {
	served := chatservertest.Serve(t, chatserver.Options{MaxContext: 1024})
	srv, tk, m := served.Server, served.Tokenizer, served.Model
	envURL := startEnv(t, "--max-turns", "3", "--max-tokens", "40")

	plug := genchat.New()
	if err := plug.Configure(context.Background(), map[string]any{"url": envURL, "timeout_s": 300.0, "poll_s": 1.0}); err != nil {
		t.Fatal(err)
	}
	d := rollout.Deps{Env: plug, Tokenizer: tk, Config: rollout.Config{ResponseLength: 512,
		Sampling: rollout.SamplingParams{Temperature: 1, Seed: 3}}}
	loop := rollout.NewExternalAgentLoop(d, srv, 300*time.Second)
	questions := []struct{ q, a string }{
		{"Tom has 3 apples and buys 69 more. How many apples does he have?", "3+69=<<3+69=72>>72\n#### 72"},
		{"A box holds 12 eggs. How many eggs are in 5 boxes?", "12*5=<<12*5=60>>60\n#### 60"},
	}
	outs := make([]*rollout.Output, len(questions))
	errs := make([]error, len(questions))
	var wg sync.WaitGroup
	for i, q := range questions {
		row, err := plug.Preprocess(context.Background(), task.Record{Index: int64(i), Split: "test", Data: map[string]any{"question": q.q, "answer": q.a}})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(i int, row task.Row) {
			defer wg.Done()
			outs[i], errs[i] = loop.Run(context.Background(), &rollout.Sample{Row: row, UID: fmt.Sprintf("e2e-%d", i), SampleIndex: int64(i)})
		}(i, row)
	}
	wg.Wait()
	multi := false
	for i, out := range outs {
		if errs[i] != nil {
			t.Fatalf("trajectory %d: %v", i, errs[i])
		}
		if !out.EndResult.HasReward || (out.EndResult.Reward != 0 && out.EndResult.Reward != 1) {
			t.Fatalf("trajectory %d: reward %v/%v", i, out.EndResult.HasReward, out.EndResult.Reward)
		}
		calls := out.EndResult.Metrics["external/calls"]
		if calls < 1 || calls != out.EndResult.Metrics["env/model_calls"] || out.AssistantTurns != int(calls) {
			t.Fatalf("trajectory %d: %v calls recorded, the environment made %v, %d chained", i, calls, out.EndResult.Metrics["env/model_calls"], out.AssistantTurns)
		}
		prompt := tk.Decode(out.PromptIDs, false)
		if !strings.Contains(prompt, questions[i].q) || !strings.Contains(prompt, "calculator") {
			t.Fatalf("trajectory %d: the prompt lacks the question or the tool: %q", i, prompt)
		}
		if len(out.Messages) < 3 || out.Messages[len(out.Messages)-1].Role != "assistant" {
			t.Fatalf("trajectory %d: messages %+v", i, out.Messages)
		}
		t.Logf("trajectory %d: reward %v, %v calls, %d chained, %d tool calls, %d response tokens; last reply %q", i,
			out.EndResult.Reward, calls, out.AssistantTurns, out.ToolCalls, len(out.ResponseIDs), out.Messages[len(out.Messages)-1].Content)
		checkLogprobs(t, m, out)
		multi = multi || out.AssistantTurns > 1
	}
	if !multi {
		t.Fatal("no trajectory made more than one model call: the conversation path was not exercised")
	}
}

// checkLogprobs runs the training forward over prompt + response and compares its log-prob of
// every model token with the one recorded at sampling.
func checkLogprobs(t *testing.T, m *model.Model, out *rollout.Output) {
	t.Helper()
	seq := append(append([]int(nil), out.PromptIDs...), out.ResponseIDs...)
	T := len(seq)
	b := model.Batch{B: 1, T: T, Tokens: make([]int32, T), Targets: make([]int32, T)}
	for i, id := range seq {
		b.Tokens[i] = int32(id)
		b.Targets[i] = -1
	}
	P := len(out.PromptIDs)
	for k := range out.ResponseIDs {
		b.Targets[P+k-1] = int32(out.ResponseIDs[k])
	}
	a := m.NewActs(1, T)
	if err := m.Forward(a, b); err != nil {
		t.Fatal(err)
	}
	n, worst := 0, 0.0
	for k, mask := range out.ResponseMask {
		if mask == 0 {
			continue
		}
		n++
		worst = math.Max(worst, math.Abs(float64(a.Logp[P+k-1]-out.ResponseLogprobs[k])))
	}
	if n == 0 || worst > 0.05 {
		t.Fatalf("%d model tokens; the largest difference between sampled and recomputed log-probs is %.4f", n, worst)
	}
	t.Logf("%d model tokens: sampled and recomputed log-probs agree within %.4f", n, worst)
}

// scripted answers the k-th call of a trajectory with texts[k] and the end-of-turn token.
type scripted struct {
	tk    *tokenizer.Tokenizer
	texts []string
	mu    sync.Mutex
	n     int // calls so far (one trajectory at a time)
}

func (s *scripted) Generate(_ context.Context, prompt []int, p rollout.SamplingParams) (rollout.Generation, error) {
	s.mu.Lock()
	k := s.n
	s.n++
	s.mu.Unlock()
	ids := append(s.tk.Encode(s.texts[min(k, len(s.texts)-1)], false), s.tk.EOS())
	lp := make([]float32, len(ids))
	for i := range lp {
		lp[i] = -0.5
	}
	return rollout.Generation{Tokens: ids, Logprobs: lp, FinishReason: "stop"}, nil
}

// TestToolRoundTrip: a policy that calls the calculator, through the openai client's function
// calling: the environment runs the tool, sends the conversation back, and the second prompt
// extends the first call token for token; the environment rewards the right answer.
func TestToolRoundTrip(t *testing.T) {
	mpath := chatservertest.ModelPath(t)
	envURL := startEnv(t, "--max-turns", "3", "--max-tokens", "64")
	tk, err := tokenizer.Load(mpath)
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	pol := &scripted{tk: tk, texts: []string{
		"Let me compute.\n<tool_call>\n{\"name\": \"calculator\", \"arguments\": {\"expression\": \"3 + 69\"}}\n</tool_call>",
		"Tom has 72 apples.\n#### 72"}}
	srv := chatserver.New(pol, tk, chatserver.Options{MaxContext: 2048})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	plug := genchat.New()
	if err := plug.Configure(context.Background(), map[string]any{"url": envURL, "timeout_s": 60.0, "poll_s": 1.0}); err != nil {
		t.Fatal(err)
	}
	loop := rollout.NewExternalAgentLoop(rollout.Deps{Env: plug, Tokenizer: tk, Config: rollout.Config{ResponseLength: 512}}, srv, time.Minute)
	row, _ := plug.Preprocess(context.Background(), task.Record{Split: "test", Data: map[string]any{
		"question": "Tom has 3 apples and buys 69 more. How many apples does he have?", "answer": "#### 72"}})
	out, err := loop.Run(context.Background(), &rollout.Sample{Row: row, UID: "tool"})
	if err != nil {
		t.Fatal(err)
	}
	if out.EndResult.Reward != 1 || out.AssistantTurns != 2 || out.UserTurns != 1 || out.ToolCalls != 1 ||
		out.EndResult.Metrics["env/tool_calls"] != 1 {
		t.Fatalf("reward %v, %d chained calls, %d observations, %d tool calls (env: %v)", out.EndResult.Reward,
			out.AssistantTurns, out.UserTurns, out.ToolCalls, out.EndResult.Metrics)
	}
	// The observation between the two completions is the tool's answer, templated alone.
	var obs []int
	for k, m := range out.ResponseMask {
		if m == 0 {
			obs = append(obs, out.ResponseIDs[k])
		}
	}
	if text := tk.Decode(obs, false); !strings.Contains(text, "72") || !strings.Contains(text, "tool") {
		t.Fatalf("observation tokens %q", text)
	}
	var tool task.Message
	for _, m := range out.Messages {
		if m.Role == "tool" {
			tool = m
		}
	}
	if tool.Content != "72" || tool.ToolCallID == "" {
		t.Fatalf("tool message %+v", tool)
	}
}
