package gsm8kplugin

import (
	"context"
	"encoding/json"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/sdk/conformance"
	"github.com/rlhost/rlhost/sdk/task"
	"github.com/rlhost/rlhost/tasks/gsm8k"
)

func TestConformanceInProcess(t *testing.T) { conformance.RunTask(t, New()) }

func TestConformanceBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the plugin binary")
	}
	bin := filepath.Join(t.TempDir(), "rlhost-task-gsm8k")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/rlhost-task-gsm8k").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	conformance.RunBinary(t, bin, conformance.Options{})
}

func TestPreprocessMatchesVerlSchema(t *testing.T) {
	row, err := New().Preprocess(context.Background(), task.Record{Index: 0, Split: "train", Data: sampleRecord})
	if err != nil {
		t.Fatal(err)
	}
	q := sampleRecord["question"].(string)
	want := task.Row{
		DataSource: "openai/gsm8k",
		Prompt: []task.Message{
			{Role: "system", Content: gsm8k.SystemPrompt},
			{Role: "user", Content: q + " Let's think step by step and output the final answer after `####`."},
		},
		Ability:     "math",
		RewardModel: task.RewardModel{Style: "rule", GroundTruth: "72"},
		ExtraInfo: map[string]any{
			"split": "train", "index": int64(0), "answer": sampleRecord["answer"], "question": q,
			"need_tools_kwargs": true,
			"tools_kwargs":      map[string]any{"calc_gsm8k_reward": map[string]any{"create_kwargs": map[string]any{"ground_truth": "72"}}},
			"interaction_kwargs": map[string]any{
				"query": q + " Let's think step by step and output the final answer after `####`.", "ground_truth": "72"},
			// the cold-start trajectory (docs/sft.md): the reasoning and a tool call, the
			// tool's reply, the final answer
			"sft_messages": []any{
				map[string]any{"role": "assistant", "content": "Natalia sold 48/2 = 24 clips in May.\nNatalia sold 48+24 = 72 clips altogether in April and May.",
					"tool_calls": []any{map[string]any{"type": "function", "function": map[string]any{"name": "calc_gsm8k_reward", "arguments": `{"answer":"72"}`}}}},
				map[string]any{"role": "tool", "content": "Current parsed answer='72' reward=1.0"},
				map[string]any{"role": "assistant", "content": "#### 72"},
			},
		},
		AgentName: "tool_agent",
	}
	if !reflect.DeepEqual(row, want) {
		g, _ := json.MarshalIndent(row, "", " ")
		w, _ := json.MarshalIndent(want, "", " ")
		t.Fatalf("row:\n%s\nwant:\n%s", g, w)
	}
}

func TestPreprocessBadRecords(t *testing.T) {
	cases := []struct {
		data map[string]any
		want string
	}{
		{map[string]any{"question": "q"}, `want string fields "question" and "answer", have [question]`},
		{map[string]any{"question": "q", "answer": 72}, `have [answer question]`},
		{map[string]any{"question": "q", "answer": "no final answer"}, `no "#### <number>" final answer`},
	}
	for _, c := range cases {
		_, err := New().Preprocess(context.Background(), task.Record{Index: 7, Split: "test", Data: c.data})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "record 7") {
			t.Errorf("%v: got %v, want an error naming record 7 and %q", c.data, err, c.want)
		}
	}
}

func TestConfigure(t *testing.T) {
	tk := New()
	ctx := context.Background()
	if err := tk.Configure(ctx, map[string]any{"tool_bonsu": 0.1}); err == nil || !strings.Contains(err.Error(), `did you mean "tool_bonus"`) {
		t.Errorf("misspelt key: got %v", err)
	}
	if err := tk.Configure(ctx, map[string]any{"score_method": "lenient"}); err == nil || !strings.Contains(err.Error(), "score_method") {
		t.Errorf("bad method: got %v", err)
	}
	if err := tk.Configure(ctx, map[string]any{"format_score": "high"}); err == nil || !strings.Contains(err.Error(), "want a number") {
		t.Errorf("bad number: got %v", err)
	}
	if err := tk.Configure(ctx, map[string]any{"score_method": "flexible", "format_score": 0.1, "tool_bonus": 0.1, "format_penalty": int64(-1)}); err != nil {
		t.Fatal(err)
	}
	got := tk.config()
	want := Config{ScoreMethod: gsm8k.Flexible, FormatScore: 0.1, Shaping: gsm8k.Shaping{FormatPenalty: -1, ToolBonus: 0.1}}
	if got != want {
		t.Errorf("config %+v, want %+v", got, want)
	}
}

func TestScore(t *testing.T) {
	ctx := context.Background()
	items := []task.ScoreItem{
		{Solution: "so #### 72", GroundTruth: "72"},
		{Solution: "the answer is 72", GroundTruth: "72"},
		{Solution: "#### 71", GroundTruth: "72"},
		{Solution: "#### 72", GroundTruth: "72", ExtraInfo: map[string]any{"num_tool_calls": int64(2)}},
		{Solution: "72", GroundTruth: []any{"72"}},
	}
	tk := New()
	res, err := tk.Score(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	got := []float64{res[0].Score, res[1].Score, res[2].Score, res[3].Score}
	if !reflect.DeepEqual(got, []float64{1, 0, 0, 1}) || res[4].Err == "" {
		t.Errorf("default scores %v (err of item 4: %q); want [1 0 0 1] and an error", got, res[4].Err)
	}
	if err := tk.Configure(ctx, map[string]any{"score_method": "flexible", "tool_bonus": 0.1, "format_penalty": -0.5}); err != nil {
		t.Fatal(err)
	}
	res, _ = tk.Score(ctx, items)
	got = []float64{res[0].Score, res[1].Score, res[2].Score, res[3].Score}
	want := []float64{1, 1 - 0.5, 0, 1 + 0.1}
	for i := range want {
		if diff := got[i] - want[i]; diff > 1e-12 || diff < -1e-12 {
			t.Errorf("shaped score %d = %v, want %v", i, got[i], want[i])
		}
	}
	if res[3].Components["accuracy"] != 1 {
		t.Errorf("components %v", res[3].Components)
	}
}

func TestToolAndInteractionThroughObs(t *testing.T) {
	ctx := context.Background()
	tk := New()
	row, err := tk.Preprocess(ctx, task.Record{Index: 0, Split: "train", Data: sampleRecord})
	if err != nil {
		t.Fatal(err)
	}
	st, err := tk.Start(ctx, task.StartRequest{Row: row, TrajectoryID: "t"})
	if err != nil {
		t.Fatal(err)
	}
	obs, err := tk.Obs(ctx, task.ObsRequest{InstanceID: st.InstanceID, Kind: task.ObsTools, Assistant: task.Message{
		Role: "assistant", ToolCalls: []task.ToolCall{
			{ID: "a", Name: "calc_gsm8k_reward", Arguments: json.RawMessage(`{"answer": "72"}`)},
			{ID: "b", Name: "calc_gsm8k_reward", Arguments: json.RawMessage(`{"answer": 70}`)},
			{ID: "c", Name: "calc_gsm8k_reward", Arguments: json.RawMessage(`{"answer": "72"`)},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	wantText := []string{"Current parsed answer='72' reward=1.0", "Current parsed answer='70' reward=0.0", "Error when executing tool: "}
	wantStep := []float64{0, -0.05, 0}
	for i, r := range obs.ToolResults {
		if !strings.HasPrefix(r.Text, wantText[i]) || r.StepReward != wantStep[i] || r.Error != (i == 2) {
			t.Errorf("call %d: %+v; want text %q, step reward %v", i, r, wantText[i], wantStep[i])
		}
		if obs.Messages[i].Role != "tool" || obs.Messages[i].Content != r.Text {
			t.Errorf("message %d: %+v", i, obs.Messages[i])
		}
	}
	hist := []task.Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "I think #### 72"}}
	obs, err = tk.Obs(ctx, task.ObsRequest{InstanceID: st.InstanceID, Kind: task.ObsInteraction, History: hist, Assistant: hist[1]})
	if err != nil {
		t.Fatal(err)
	}
	if !obs.Done || obs.TurnReward != 1 || obs.Messages[0].Content != gsm8k.CorrectText || obs.Messages[0].Role != "user" {
		t.Errorf("interaction on a right answer: %+v", obs)
	}
	if _, err := tk.End(ctx, task.EndRequest{InstanceID: st.InstanceID}); err != nil {
		t.Fatal(err)
	}
}
