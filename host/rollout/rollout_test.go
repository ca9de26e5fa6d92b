package rollout

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/tasks/gsm8k/gsm8kplugin"
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

// scripted is a Policy that answers the k-th generate call of a trajectory with its k-th text
// (then the end-of-turn token), so the state machine can be driven turn by turn. The turn is
// read off the prompt: every earlier turn added two end-of-turn tokens (the assistant's and the
// observation's). It records the prompts it was given.
type scripted struct {
	tk      *tokenizer.Tokenizer
	turns   []string
	mu      sync.Mutex
	base    int // end-of-turn tokens in a first-turn prompt
	prompts [][]int
}

func (s *scripted) Generate(_ context.Context, prompt []int, p SamplingParams) (Generation, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prompts = append(s.prompts, append([]int(nil), prompt...))
	eos := 0
	for _, id := range prompt {
		if id == s.tk.EOS() {
			eos++
		}
	}
	if len(s.prompts) == 1 {
		s.base = eos
	}
	text := s.turns[min((eos-s.base)/2, len(s.turns)-1)]
	ids := append(s.tk.Encode(text, false), s.tk.EOS())
	reason := "stop"
	if len(ids) > p.MaxTokens {
		ids, reason = ids[:p.MaxTokens], "length"
	}
	lp := make([]float32, len(ids))
	for i := range lp {
		lp[i] = -0.5
	}
	return Generation{Tokens: ids, Logprobs: lp, FinishReason: reason}, nil
}

var gsm8kRecord = map[string]any{
	"question": "Tom has 3 apples and buys 69 more. How many apples does he have?",
	"answer":   "3+69=<<3+69=72>>72\n#### 72",
}

func gsm8kSample(t *testing.T, env *gsm8kplugin.Task) *Sample {
	t.Helper()
	ctx := context.Background()
	row, err := env.Preprocess(ctx, task.Record{Index: 5, Split: "train", Data: gsm8kRecord})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := env.Info(ctx)
	return &Sample{Row: row, Prompt: task.Prompt{Messages: row.Prompt, Tools: info.Tools}, UID: "u5", SampleIndex: 5}
}

const callTool = `I compute 3+69=72.<tool_call>
{"name": "calc_gsm8k_reward", "arguments": {"answer": "72"}}
</tool_call>`

func run(t *testing.T, cfg Config, turns ...string) (*Output, *scripted, *tokenizer.Tokenizer) {
	t.Helper()
	tk := smolTokenizer(t)
	env := gsm8kplugin.New()
	pol := &scripted{tk: tk, turns: turns}
	loop, name, err := LoopFor(ToolAgent, Deps{Policy: pol, Tokenizer: tk, Env: env, Config: cfg})
	if err != nil || name != ToolAgent {
		t.Fatal(name, err)
	}
	out, err := loop.Run(context.Background(), gsm8kSample(t, env))
	if err != nil {
		t.Fatal(err)
	}
	if env.Running() != 0 {
		t.Errorf("%d plugin instances left running", env.Running())
	}
	return out, pol, tk
}

func maskRuns(mask []float32) string {
	var b strings.Builder
	for i, m := range mask {
		if i == 0 || m != mask[i-1] {
			if m == 1 {
				b.WriteByte('M')
			} else {
				b.WriteByte('o')
			}
		}
	}
	return b.String()
}

func TestToolAgentCallsToolAndContinues(t *testing.T) {
	out, pol, tk := run(t, Config{ResponseLength: 400}, callTool, "The answer is #### 72")
	if maskRuns(out.ResponseMask) != "MoM" {
		t.Fatalf("mask runs %q, want model, observation, model", maskRuns(out.ResponseMask))
	}
	if out.AssistantTurns != 2 || out.UserTurns != 1 || out.NumTurns != 4 || out.ToolCalls != 1 || out.ToolErrors != 0 {
		t.Errorf("counters %+v", out)
	}
	if len(out.ResponseIDs) != len(out.ResponseMask) || len(out.ResponseLogprobs) != len(out.ResponseMask) {
		t.Fatalf("lengths ids %d mask %d logprobs %d", len(out.ResponseIDs), len(out.ResponseMask), len(out.ResponseLogprobs))
	}
	// The observation tokens are the tool message templated alone.
	var obs []int
	for i, m := range out.ResponseMask {
		if m == 0 {
			obs = append(obs, out.ResponseIDs[i])
			if out.ResponseLogprobs[i] != 0 {
				t.Fatalf("observation token %d has log-prob %v", i, out.ResponseLogprobs[i])
			}
		}
	}
	obsText := tk.Decode(obs, false)
	want, _ := tk.RenderObservation([]tokenizer.Message{{Role: "tool", Content: "Current parsed answer='72' reward=1.0"}})
	if obsText != want {
		t.Errorf("observation %q, want %q", obsText, want)
	}
	// Token in, token out: the second call's prompt is the first prompt + everything so far.
	if len(pol.prompts) != 2 {
		t.Fatalf("%d generate calls", len(pol.prompts))
	}
	second := pol.prompts[1]
	firstTurnLen := len(out.ResponseIDs) - len(tk.Encode("The answer is #### 72", false)) - 1
	if len(second) != len(out.PromptIDs)+firstTurnLen {
		t.Errorf("second prompt has %d tokens, want %d", len(second), len(out.PromptIDs)+firstTurnLen)
	}
	// The prompt carries the tool schema through the chat template.
	if p := tk.Decode(out.PromptIDs, false); !strings.Contains(p, "calc_gsm8k_reward") || !strings.HasSuffix(p, "<|im_start|>assistant\n") {
		t.Errorf("prompt text %q", p)
	}
	if out.ToolRewards[0] != 0 {
		t.Errorf("tool reward %v", out.ToolRewards)
	}
}

func TestToolAgentLimitsAndFaults(t *testing.T) {
	cases := []struct {
		name   string
		cfg    Config
		turns  []string
		check  func(*testing.T, *Output)
		finish string
	}{
		{"no tool call ends the episode", Config{ResponseLength: 300}, []string{"#### 72"}, func(t *testing.T, o *Output) {
			if o.AssistantTurns != 1 || o.NumTurns != 2 || maskRuns(o.ResponseMask) != "M" {
				t.Errorf("%+v", o)
			}
		}, "stop"},
		{"malformed tool call JSON is counted and skipped", Config{ResponseLength: 300},
			[]string{`<tool_call>{"name": "calc_gsm8k_reward", "arguments": {"answer": </tool_call>`}, func(t *testing.T, o *Output) {
				if o.ParseErrors != 1 || o.ToolCalls != 0 || o.AssistantTurns != 1 {
					t.Errorf("%+v", o)
				}
			}, "stop"},
		{"unknown tool becomes error text", Config{ResponseLength: 400},
			[]string{`<tool_call>{"name": "calculator", "arguments": {}}</tool_call>`, "#### 72"}, func(t *testing.T, o *Output) {
				if o.ToolErrors != 1 || o.ToolCalls != 1 || !strings.Contains(o.Messages[len(o.Messages)-2].Content, `Error when executing tool: unknown tool "calculator"`) {
					t.Errorf("%+v", o.Messages)
				}
			}, "stop"},
		{"max_assistant_turns", Config{ResponseLength: 400, MaxAssistantTurns: 1}, []string{callTool}, func(t *testing.T, o *Output) {
			if o.AssistantTurns != 1 || o.ToolCalls != 0 {
				t.Errorf("%+v", o)
			}
		}, "max_turns"},
		{"max_user_turns", Config{ResponseLength: 600, MaxUserTurns: 1}, []string{callTool, callTool, "#### 72"}, func(t *testing.T, o *Output) {
			if o.AssistantTurns != 2 || o.UserTurns != 1 {
				t.Errorf("%+v", o)
			}
		}, "max_turns"},
		{"observation over budget is not appended", Config{ResponseLength: 40}, []string{callTool}, func(t *testing.T, o *Output) {
			if maskRuns(o.ResponseMask) != "M" || o.UserTurns != 0 {
				t.Errorf("mask %q user turns %d", maskRuns(o.ResponseMask), o.UserTurns)
			}
		}, "length"},
		{"generation cut by the budget", Config{ResponseLength: 5}, []string{callTool}, func(t *testing.T, o *Output) {
			if len(o.ResponseIDs) != 5 {
				t.Errorf("%d tokens", len(o.ResponseIDs))
			}
		}, "length"},
		{"only max_parallel_calls calls run", Config{ResponseLength: 600, MaxParallelCalls: 1},
			[]string{callTool + callTool, "#### 72"}, func(t *testing.T, o *Output) {
				if o.ToolCalls != 1 {
					t.Errorf("%d tool calls", o.ToolCalls)
				}
			}, "stop"},
		{"interaction answers turns without tool calls", Config{ResponseLength: 600, Interaction: true},
			[]string{"#### 70", "#### 72"}, func(t *testing.T, o *Output) {
				if len(o.TurnScores) != 2 || o.TurnScores[0] != 0 || o.TurnScores[1] != 1 || maskRuns(o.ResponseMask) != "MoMo" {
					t.Errorf("scores %v mask %q", o.TurnScores, maskRuns(o.ResponseMask))
				}
			}, "interaction"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, _, _ := run(t, c.cfg, c.turns...)
			if out.FinishReason != c.finish {
				t.Errorf("finish %q, want %q", out.FinishReason, c.finish)
			}
			c.check(t, out)
		})
	}
}

func TestLoopFor(t *testing.T) {
	d := Deps{Env: gsm8kplugin.New()}
	if _, name, err := LoopFor("", d); err != nil || name != SingleTurnAgent {
		t.Errorf("missing agent_name: %s %v", name, err)
	}
	d.Config.DefaultAgentLoop = ToolAgent
	if _, name, err := LoopFor("", d); err != nil || name != ToolAgent {
		t.Errorf("default tool agent: %s %v", name, err)
	}
	if _, _, err := LoopFor("tool_agnet", d); err == nil || !strings.Contains(err.Error(), `did you mean "tool_agent"?`) {
		t.Errorf("unknown name: %v", err)
	}
	if _, _, err := LoopFor(ToolAgent, Deps{}); err == nil || !strings.Contains(err.Error(), "needs a task with an environment") {
		t.Errorf("tool agent without env: %v", err)
	}
}

func TestTruncateToolText(t *testing.T) {
	s := strings.Repeat("a", 10) + strings.Repeat("é", 10)
	cases := map[string]string{
		"left":   strings.Repeat("a", 6) + "...(truncated)",
		"right":  "(truncated)..." + strings.Repeat("é", 6),
		"middle": "aaa...(truncated)...ééé",
	}
	for side, want := range cases {
		if got := TruncateToolText(s, 6, side); got != want {
			t.Errorf("%s: %q, want %q", side, got, want)
		}
	}
	if got := TruncateToolText("short", 6, "middle"); got != "short" {
		t.Errorf("short text changed: %q", got)
	}
}

// flaky fails every k-th Obs call, as a crashing plugin would.
type flaky struct {
	*gsm8kplugin.Task
	mu sync.Mutex
	n  int
	k  int
}

func (f *flaky) Obs(ctx context.Context, r task.ObsRequest) (task.ObsResult, error) {
	f.mu.Lock()
	f.n++
	fail := f.n%f.k == 0
	f.mu.Unlock()
	if fail {
		return task.ObsResult{}, context.DeadlineExceeded
	}
	return f.Task.Obs(ctx, r)
}

func TestRunBatchRetriesThenDrops(t *testing.T) {
	tk := smolTokenizer(t)
	env := &flaky{Task: gsm8kplugin.New(), k: 3}
	s := gsm8kSample(t, env.Task)
	var samples []*Sample
	for i := 0; i < 12; i++ {
		c := *s
		c.RolloutN = i
		samples = append(samples, &c)
	}
	d := Deps{Policy: &scripted{tk: tk, turns: []string{callTool, "#### 72"}}, Tokenizer: tk, Env: env, Config: Config{ResponseLength: 400}}
	res, err := RunBatch(context.Background(), d, samples)
	if err != nil {
		t.Fatal(err)
	}
	kept := len(res.Kept())
	if res.Retried == 0 || kept+res.Dropped != len(samples) || len(res.Errors) != res.Dropped {
		t.Fatalf("retried %d dropped %d kept %d errors %v", res.Retried, res.Dropped, kept, res.Errors)
	}
	// Each attempt calls Obs once (one tool call), so the calls are the samples plus the
	// retries, and every third of them failed: each failure is a first attempt (retried) or a
	// second one (dropped). Which calls fail depends on how the goroutines interleave, so the
	// split between retried and dropped varies from run to run; the sum does not. Four first
	// attempts fail when no retry lands on a failing call; at least two when every retry does.
	if env.n != len(samples)+res.Retried {
		t.Errorf("%d Obs calls for %d samples and %d retries", env.n, len(samples), res.Retried)
	}
	if res.Retried+res.Dropped != env.n/env.k {
		t.Errorf("every third Obs fails: %d calls, %d retried + %d dropped", env.n, res.Retried, res.Dropped)
	}
	if res.Retried < 2 || res.Dropped > res.Retried {
		t.Errorf("retried %d dropped %d: a trajectory is dropped only after a retry", res.Retried, res.Dropped)
	}
	if env.Running() != 0 {
		t.Errorf("%d instances leaked", env.Running())
	}
	// An unknown agent_name fails the batch at once.
	bad := *s
	bad.Row.AgentName = "react_agent"
	if _, err := RunBatch(context.Background(), d, []*Sample{&bad}); err == nil || !strings.Contains(err.Error(), "unknown agent_name") {
		t.Errorf("unknown agent: %v", err)
	}
}
