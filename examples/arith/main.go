// Command rlhost-task-arith is a complete third-party task plugin: small arithmetic problems,
// a calculator tool, and an exact-match score. It imports only the rlhost SDK.
package main

import (
	"context"
	"fmt"
	"regexp"

	"github.com/rlhost/rlhost/sdk/task"
)

type Arith struct{ *task.ToolEnv }

func (a Arith) Info(context.Context) (task.Info, error) {
	return task.Info{Name: "arith", Version: "0.1.0", Description: "two-operand arithmetic",
		Tools: a.ToolSpecs(), DefaultAgentLoop: task.ToolAgent, DataSources: []string{"arith"},
		DefaultInputs: []task.InputFile{{Split: "train", Name: "train.jsonl"}, {Split: "test", Name: "test.jsonl"}},
		Samples:       []task.Sample{{Split: "train", Record: map[string]any{"a": 3, "b": 4, "op": "+"}, ReferenceSolution: "7"}}}, nil
}

// Preprocess turns {"a": 3, "b": 4, "op": "+"} into a row.
func (Arith) Preprocess(_ context.Context, r task.Record) (task.Row, error) {
	a, b, op := r.Data["a"], r.Data["b"], r.Data["op"]
	x, okA := a.(int64)
	y, okB := b.(int64)
	answers := map[any]int64{"+": x + y, "-": x - y, "*": x * y}
	ans, okOp := answers[op]
	if !okA || !okB || !okOp {
		return task.Row{}, task.InvalidArgument("record %d: want integer a, b and op in + - *", r.Index)
	}
	q := fmt.Sprintf("What is %d %s %d? Answer with the number only.", x, op, y)
	return task.Row{DataSource: "arith", Ability: "math", AgentName: task.ToolAgent,
		Prompt:      []task.Message{{Role: "user", Content: q}},
		RewardModel: task.RewardModel{Style: "rule", GroundTruth: fmt.Sprint(ans)},
		ExtraInfo:   map[string]any{"split": r.Split, "index": r.Index, "sft_messages": coldStart(x, y, op.(string), ans)}}, nil
}

// coldStart is the trajectory a record gives for supervised fine-tuning (the messages after
// the prompt; rlhost preprocess writes them to sft/SPLIT.parquet): a calculator call, its
// result, and the answer.
func coldStart(a, b int64, op string, ans int64) []any {
	args := fmt.Sprintf(`{"a": %d, "op": %q, "b": %d}`, a, op, b)
	return []any{
		map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
			"type": "function", "function": map[string]any{"name": "calculator", "arguments": args}}}},
		map[string]any{"role": "tool", "content": fmt.Sprint(ans)},
		map[string]any{"role": "assistant", "content": fmt.Sprint(ans)},
	}
}

var lastInt = regexp.MustCompile(`-?\d+`)

// Score is 1 when the last integer in the response equals the ground truth.
func (Arith) Score(_ context.Context, items []task.ScoreItem) ([]task.ScoreResult, error) {
	out := make([]task.ScoreResult, len(items))
	for i, it := range items {
		if m := lastInt.FindAllString(it.Solution, -1); len(m) > 0 && m[len(m)-1] == fmt.Sprint(it.GroundTruth) {
			out[i].Score = 1
		}
	}
	return out, nil
}

// calculator evaluates "a op b" for the model.
type calculator struct{}

func (calculator) Spec() task.ToolSpec {
	return task.ToolSpec{Name: "calculator", Description: "Compute a op b.", Parameters: task.SchemaObject(
		"a", `{"type":"integer"}`, "op", `{"type":"string","enum":["+","-","*"]}`, "b", `{"type":"integer"}`)}
}

func (calculator) Call(_ context.Context, c task.ToolInvocation) (task.ToolOutput, error) {
	a, okA := c.Arguments["a"].(int64)
	b, okB := c.Arguments["b"].(int64)
	r, okOp := map[any]int64{"+": a + b, "-": a - b, "*": a * b}[c.Arguments["op"]]
	if !okA || !okB || !okOp {
		return task.ToolOutput{}, fmt.Errorf("want integers a, b and op in + - *")
	}
	return task.ToolOutput{Text: fmt.Sprint(r)}, nil
}

func main() { task.Serve(Arith{&task.ToolEnv{Tools: []task.Tool{calculator{}}}}) }
