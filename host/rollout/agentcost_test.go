package rollout

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	hostplugin "github.com/rlhost/rlhost/host/plugin"
	"github.com/rlhost/rlhost/sdk/task"
)

// The host's cost of a GRPO step's rollouts outside the generator
// (docs/gpu.md, "The GRPO step's host time"): scripts/gpu/proof.sh's
// step (the arith task's plugin process, 32 prompts x 8 samples, responses
// of 256 random tokens, one assistant turn) through RunBatch and the
// tool_agent loop, with a policy that answers at once, then the responses
// decoded and one Score of the batch, as the trainer's reward runs it; the generator's own cost is
// BenchmarkGRPORollout (gpu/cuda).

// randomPolicy answers every call with MaxTokens ids drawn uniformly from
// [0, V) at once: the responses of a random checkpoint.
type randomPolicy struct{ V int }

func (p randomPolicy) Generate(_ context.Context, prompt []int, sp SamplingParams) (Generation, error) {
	r := rand.New(rand.NewPCG(sp.Seed, uint64(len(prompt))))
	g := Generation{Tokens: make([]int, sp.MaxTokens), Logprobs: make([]float32, sp.MaxTokens), FinishReason: "length"}
	for i := range g.Tokens {
		g.Tokens[i], g.Logprobs[i] = r.IntN(p.V), -11
	}
	return g, nil
}

// arithPlugin builds examples/arith's plugin into a temporary folder and
// starts it.
func arithPlugin(tb testing.TB) *hostplugin.Task {
	tb.Helper()
	dir := tb.TempDir()
	bin := filepath.Join(dir, "rlhost-task-arith")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..", "examples", "arith")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Skipf("build the arith plugin: %v\n%s", err, out)
	}
	p, err := hostplugin.OpenTaskBinary(context.Background(), hostplugin.Binary{Kind: "task", Name: "arith", Path: bin}, nil,
		hostplugin.Options{Stderr: os.Stderr})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

func BenchmarkGRPOAgentLoop(b *testing.B) {
	tk := smolTokenizer(b)
	env := arithPlugin(b)
	const prompts, n, respLen = 32, 8, 256
	d := Deps{Policy: randomPolicy{V: tk.VocabSize()}, Tokenizer: tk, Env: env, TaskName: "arith",
		Config: Config{ResponseLength: respLen, MaxAssistantTurns: 2, DefaultAgentLoop: ToolAgent,
			Sampling: SamplingParams{Temperature: 1}}}
	var samples []*Sample
	for i := range prompts {
		row := task.Row{DataSource: "arith", AgentName: ToolAgent,
			Prompt:      []task.Message{{Role: "user", Content: fmt.Sprintf("What is %d + %d? Answer with the number only.", i, 7)}},
			RewardModel: task.RewardModel{Style: "rule", GroundTruth: fmt.Sprint(i + 7)}, ExtraInfo: map[string]any{"index": int64(i)}}
		ids, err := Chat{Tok: tk}.EncodePrompt(ToolAgent, task.Prompt{Messages: row.Prompt, Tools: env.CachedInfo().Tools})
		if err != nil {
			b.Fatal(err)
		}
		for r := range n {
			samples = append(samples, &Sample{Row: row, Prompt: task.Prompt{Messages: row.Prompt, Tools: env.CachedInfo().Tools},
				UID: fmt.Sprint(i), SampleIndex: int64(i), RolloutN: r, PromptIDs: ids})
		}
	}
	var loop, decode, score time.Duration // the loops, the responses decoded for Score, Score
	for b.Loop() {
		t0 := time.Now()
		res, err := RunBatch(context.Background(), d, samples)
		if err != nil || len(res.Kept()) != len(samples) {
			b.Fatalf("%d of %d kept: %v %v", len(res.Kept()), len(samples), err, res.Errors)
		}
		t1 := time.Now()
		items := make([]task.ScoreItem, 0, len(samples))
		texts := ResponseTexts(tk, res.Kept())
		for i, o := range res.Kept() {
			items = append(items, task.ScoreItem{DataSource: o.Sample.Row.DataSource, Solution: texts[i],
				GroundTruth: o.Sample.Row.RewardModel.GroundTruth, ExtraInfo: o.Sample.Row.ExtraInfo})
		}
		t2 := time.Now()
		if _, err := env.Score(context.Background(), items); err != nil {
			b.Fatal(err)
		}
		loop, decode, score = loop+t1.Sub(t0), decode+t2.Sub(t1), score+time.Since(t2)
	}
	b.ReportMetric(loop.Seconds()/float64(b.N), "s-rollout/step")
	b.ReportMetric(decode.Seconds()/float64(b.N), "s-decode/step")
	b.ReportMetric(score.Seconds()/float64(b.N), "s-score/step")
}
