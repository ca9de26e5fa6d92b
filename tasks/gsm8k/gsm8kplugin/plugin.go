// Package gsm8kplugin is the gsm8k task as an rlhost plugin: it adapts the GSM8K logic of
// package gsm8k (veRL semantics) to the task SDK. Command rlhost-task-gsm8k serves it.
package gsm8kplugin

import (
	"context"
	"fmt"
	"sort"
	"sync"

	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/tasks/gsm8k"
)

// Version is the plugin's version.
const Version = "0.1.0"

// Config is the task section of the run config.
type Config struct {
	// ScoreMethod is "strict" (verl's default: "#### <answer>") or "flexible" (last number).
	ScoreMethod gsm8k.Method `config:"score_method" want:"\"strict\" or \"flexible\""`
	// FormatScore is the score of a found but wrong answer (verl default 0).
	FormatScore float64 `config:"format_score"`
	// Shaping is optional reward shaping, off by default (keys format_penalty, tool_bonus).
	Shaping gsm8k.Shaping `config:",inline"`
}

// DefaultConfig is verl's behaviour.
func DefaultConfig() Config { return Config{ScoreMethod: gsm8k.Strict} }

// Task is the gsm8k task: a ToolEnv with calc_gsm8k_reward and the user simulator.
type Task struct {
	*task.ToolEnv
	mu  sync.RWMutex
	cfg Config
}

// New returns the task with its default config.
func New() *Task {
	t := &Task{cfg: DefaultConfig()}
	t.ToolEnv = &task.ToolEnv{Tools: []task.Tool{calcTool{}}, Interaction: interaction{}}
	return t
}

func (t *Task) config() Config {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.cfg
}

// sampleRecord is the first problem of the GSM8K train split.
var sampleRecord = map[string]any{
	"question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?",
	"answer":   "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72",
}

// Info describes the plugin.
func (t *Task) Info(context.Context) (task.Info, error) {
	return task.Info{
		Name:             "gsm8k",
		Version:          Version,
		Description:      "GSM8K grade-school math with the calc_gsm8k_reward tool (veRL semantics)",
		Features:         []string{task.FeatureInteraction},
		Tools:            t.ToolSpecs(),
		DefaultAgentLoop: task.ToolAgent,
		DataSources:      []string{gsm8k.DataSource},
		DefaultInputs:    []task.InputFile{{Split: "train", Name: "train.jsonl"}, {Split: "test", Name: "test.jsonl"}},
		ConfigSchema: []byte(`{"type":"object","properties":{` +
			`"score_method":{"type":"string","enum":["strict","flexible"]},` +
			`"format_score":{"type":"number"},` +
			`"format_penalty":{"type":"number","description":"added when there is no strict '#### <answer>' (use a negative value)"},` +
			`"tool_bonus":{"type":"number","description":"added when the trajectory called calc_gsm8k_reward (verl issue #1569 used 0.1)"}}}`),
		Samples: []task.Sample{{Split: "train", Record: sampleRecord, ReferenceSolution: "48/2 = 24 in May, 48+24 = 72.\n#### 72"}},
	}, nil
}

// Configure applies the task config (the keys of Config's tags).
func (t *Task) Configure(_ context.Context, raw map[string]any) error {
	cfg := DefaultConfig()
	if err := task.DecodeConfig("gsm8k", raw, &cfg); err != nil {
		return err
	}
	if cfg.ScoreMethod != gsm8k.Strict && cfg.ScoreMethod != gsm8k.Flexible {
		return task.InvalidArgument("gsm8k config key %q: want \"strict\" or \"flexible\", got %q", "score_method", cfg.ScoreMethod)
	}
	t.mu.Lock()
	t.cfg = cfg
	t.mu.Unlock()
	return nil
}

// Preprocess turns a GSM8K JSONL record {question, answer} into a row of veRL's
// multi-turn-with-tool schema (examples/data_preprocess/gsm8k_multiturn_w_tool.py).
func (t *Task) Preprocess(_ context.Context, r task.Record) (task.Row, error) {
	question, okQ := r.Data["question"].(string)
	answer, okA := r.Data["answer"].(string)
	if !okQ || !okA {
		var have []string
		for k := range r.Data {
			have = append(have, k)
		}
		sort.Strings(have)
		return task.Row{}, task.InvalidArgument("gsm8k record %d of split %q: want string fields \"question\" and \"answer\", have %v",
			r.Index, r.Split, have)
	}
	solution, err := gsm8k.ExtractGroundTruth(answer)
	if err != nil {
		return task.Row{}, task.InvalidArgument("record %d of split %q: %v", r.Index, r.Split, err)
	}
	prompt := gsm8k.UserPrompt(question)
	return task.Row{
		DataSource: gsm8k.DataSource,
		Prompt: []task.Message{
			{Role: "system", Content: gsm8k.SystemPrompt},
			{Role: "user", Content: prompt},
		},
		Ability:     gsm8k.Ability,
		RewardModel: task.RewardModel{Style: gsm8k.RewardStyle, GroundTruth: solution},
		ExtraInfo: map[string]any{
			"split":             r.Split,
			"index":             r.Index,
			"answer":            answer,
			"question":          question,
			"need_tools_kwargs": true,
			"tools_kwargs": map[string]any{
				gsm8k.ToolName: map[string]any{"create_kwargs": map[string]any{"ground_truth": solution}},
			},
			"interaction_kwargs": map[string]any{"query": prompt, "ground_truth": solution},
			gsm8k.SFTMessagesKey: gsm8k.ColdStart(answer, solution),
		},
		AgentName: gsm8k.AgentName,
	}, nil
}

// Score is verl's GSM8K reward, plus the configured shaping. The number of tool calls a
// trajectory made comes from extra_info.num_tool_calls, which the host sets.
func (t *Task) Score(_ context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	cfg := t.config()
	out := make([]task.ScoreResult, len(items))
	for i, it := range items {
		gt, ok := groundTruth(it.GroundTruth)
		if !ok {
			out[i].Err = fmt.Sprintf("gsm8k: ground truth %v is not a string or number", it.GroundTruth)
			continue
		}
		base := gsm8k.ComputeScore(it.Solution, gt, cfg.ScoreMethod, cfg.FormatScore, 1)
		out[i].Score = base
		if cfg.Shaping != (gsm8k.Shaping{}) {
			calls := 0
			if n, ok := it.ExtraInfo["num_tool_calls"].(int64); ok {
				calls = int(n)
			}
			out[i].Score = cfg.Shaping.Apply(base, it.Solution, calls)
			out[i].Components = map[string]float64{"accuracy": base, "shaping": out[i].Score - base}
		}
	}
	return out, nil
}

func groundTruth(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case int64:
		return fmt.Sprint(x), true
	}
	return "", false
}

// calcTool is calc_gsm8k_reward. Like veRL's tool agent loop, every call creates a fresh
// instance from create_kwargs, executes and releases it, so the step reward compares with 0.
type calcTool struct{}

func (calcTool) Spec() task.ToolSpec {
	return task.ToolSpec{Name: gsm8k.ToolName, Description: "A tool for calculating the reward of gsm8k",
		Parameters: task.SchemaObject("answer", `{"type":"string","description":"The answer to the question"}`)}
}

func (calcTool) Call(_ context.Context, c task.ToolInvocation) (task.ToolOutput, error) {
	gt, ok := groundTruth(c.CreateKwargs["ground_truth"])
	if !ok {
		return task.ToolOutput{}, fmt.Errorf("create_kwargs.ground_truth is missing (row extra_info.tools_kwargs.%s)", gsm8k.ToolName)
	}
	args := []byte(c.RawArguments)
	if len(args) == 0 {
		args = []byte(task.EncodeJSON(c.Arguments))
	}
	r, err := gsm8k.NewTool(gt).Execute(args)
	if err != nil {
		return task.ToolOutput{}, err
	}
	return task.ToolOutput{Text: r.Text, StepReward: r.StepReward, Metrics: map[string]float64{"reward": r.Reward}}, nil
}

// interaction is verl's Gsm8kInteraction.
type interaction struct{}

func (interaction) Respond(_ context.Context, turn task.InteractionTurn) (task.InteractionReply, error) {
	gt, ok := groundTruth(turn.Kwargs["ground_truth"])
	if !ok {
		return task.InteractionReply{}, task.InvalidArgument("interaction_kwargs.ground_truth is missing from the row")
	}
	msgs := make([]gsm8k.Message, len(turn.History))
	for i, m := range turn.History {
		msgs[i] = gsm8k.Message{Role: m.Role, Content: m.Content}
	}
	term, text, reward := gsm8k.NewInteraction(gt).Respond(msgs)
	return task.InteractionReply{Text: text, Terminate: term, Score: reward}, nil
}
