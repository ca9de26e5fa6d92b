package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/host/data"
	"github.com/rlhost/rlhost/host/sft"
	"github.com/rlhost/rlhost/plugins/local"
	"github.com/rlhost/rlhost/sdk/trace"
)

// TestPreprocessWritesSFTRows: gsm8k's preprocessor gives every row a cold-start trajectory,
// which preprocess writes to SPLIT_sft.parquet and leaves out of the RL rows.
func TestPreprocessWritesSFTRows(t *testing.T) {
	in, out := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(in, "train.jsonl"), rec1+"\n"+rec2+"\n")
	writeFile(t, filepath.Join(in, "test.jsonl"), rec1+"\n")
	if _, stderr, err := run(t, "preprocess", "--task", "gsm8k", "--input", in, "--output-dir", out); err != nil {
		t.Fatalf("preprocess: %v\n%s", err, stderr)
	}
	rows, err := data.ReadParquet(filepath.Join(out, "train.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if _, ok := r.ExtraInfo["sft_messages"]; ok {
			t.Error("the RL row kept extra_info.sft_messages")
		}
	}
	var convs []sft.Conversation
	err = data.ReadTableFunc(filepath.Join(out, "train_sft.parquet"), func(i int, row map[string]any) error {
		c, err := sft.ParseConversation(row["messages"], row["tools"])
		convs = append(convs, c)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(convs) != 2 {
		t.Fatalf("%d SFT rows, want 2", len(convs))
	}
	c := convs[0]
	roles := []string{}
	for _, m := range c.Messages {
		roles = append(roles, m.Role)
	}
	if !reflect.DeepEqual(roles, []string{"system", "user", "assistant", "tool", "assistant"}) {
		t.Fatalf("roles %v", roles)
	}
	call := c.Messages[2]
	if call.Content != "3+4=7" || len(call.ToolCalls) != 1 || call.ToolCalls[0].Name != "calc_gsm8k_reward" ||
		string(call.ToolCalls[0].Arguments) != `{"answer":"7"}` {
		t.Errorf("the tool-call turn: %+v", call)
	}
	if c.Messages[3].Content != "Current parsed answer='7' reward=1.0" || c.Messages[4].Content != "#### 7" {
		t.Errorf("tool reply and answer: %+v", c.Messages[3:])
	}
	if len(c.Tools) != 1 || c.Tools[0].Name != "calc_gsm8k_reward" {
		t.Errorf("tools %+v", c.Tools)
	}
}

// TestPreprocessSwedevSFTRows: every record of swedev's starter dataset gets a cold-start
// row, and every row tokenises for SFT (its calls name the task's tools) with a template that
// renders tool calls and, written as text, with one that does not (which skips them otherwise).
func TestPreprocessSwedevSFTRows(t *testing.T) {
	out := t.TempDir()
	if _, stderr, err := run(t, "preprocess", "--task", "swedev", "--input", "../../tasks/swedev/dataset", "--output-dir", out); err != nil {
		t.Fatalf("preprocess: %v\n%s", err, stderr)
	}
	tk, err := tokenizer.Load("../../host/sft/testdata/tiny-chat")
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	// The same vocabulary with a template that ignores tool calls, as SmolLM2's does.
	b, err := os.ReadFile("../../host/sft/testdata/tiny-chat/tokenizer.json")
	if err != nil {
		t.Fatal(err)
	}
	plain, err := tokenizer.FromJSON("plain", b, tokenizer.Config{EOS: "<|im_end|>", ChatTemplate: "{%- for message in messages %}" +
		"<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n{% endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	cfg, err := sft.Load(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, split := range []struct {
		name string
		rows int
	}{{"train", 24}, {"test", 6}} {
		file := filepath.Join(out, split.name+"_sft.parquet")
		for _, c := range []struct {
			name   string
			enc    *sft.Encoder
			used   int
			reason string
		}{
			{"template with tool calls", &sft.Encoder{Tok: tk}, split.rows, ""},
			{"template without, calls as text", &sft.Encoder{Tok: plain, ToolCallsAsText: true}, split.rows, ""},
			{"template without", &sft.Encoder{Tok: plain}, 0, sft.ReasonTemplateNoTools},
		} {
			exs, st, err := sft.LoadFiles([]string{file}, c.enc, cfg, 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			if st.Rows != split.rows || st.Used != c.used || len(exs) != c.used || (c.reason != "" && st.Reasons[c.reason] != split.rows) {
				t.Errorf("%s, %s: %s %v", file, c.name, st.Summary(), st.Skipped)
			}
		}
	}
}

// genSpan is a generate span as host/tracing writes it (token ids, not text).
func genSpan(id, n string, start time.Time, attrs map[string]any, prompt string, resp []int) trace.Span {
	r, _ := json.Marshal(map[string]any{"response_ids": resp})
	return trace.Span{TraceID: id, SpanID: id + n, ParentID: id + "-r", Name: "generate", Start: start, End: start.Add(1),
		Attributes: attrs, Inputs: prompt, Outputs: string(r)}
}

// writeTraces makes a trace store with four trajectories: rewarded two-turn (tool) ones, one
// of them twice (a duplicate), an unrewarded one and a failed one.
func writeTraces(t *testing.T, dir string) {
	t.Helper()
	b := &local.Backend{}
	ctx := context.Background()
	if _, err := b.Init(ctx, trace.Run{Project: "p", Experiment: "e", RunID: "r", RunDir: dir, Config: map[string]any{}}); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1700000000, 0)
	for k, c := range []struct {
		reward float64
		err    string
		resp2  []int
	}{{1, "", []int{20, 21, 257}}, {1, "", []int{20, 21, 257}}, {0, "", []int{22, 257}}, {1, "trajectory failed", []int{23}}} {
		id := fmt.Sprintf("%032d", k)
		common := map[string]any{"step": int64(1), "sample_index": int64(k), "rollout_n": int64(0), "validate": false}
		g2 := map[string]any{"prompt_offset": int64(5)}
		for key, v := range common {
			g2[key] = v
		}
		root := map[string]any{"reward": c.reward, "data_source": "openai/gsm8k"}
		for key, v := range common {
			root[key] = v
		}
		spans := []trace.Span{
			genSpan(id, "-g1", t0.Add(time.Duration(10*k+1)), common, `{"prompt_ids":[1,2,3]}`, []int{10, 257}),
			genSpan(id, "-g2", t0.Add(time.Duration(10*k+3)), g2, `{"prompt_delta_ids":[4,5]}`, c.resp2),
			{TraceID: id, SpanID: id + "-r", Name: "agent_loop", Start: t0.Add(time.Duration(10 * k)), End: t0.Add(time.Duration(10*k + 5)),
				Attributes: root, Error: c.err},
		}
		if err := b.Export(ctx, spans); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestSFTFromTraces: the rewarded trajectories of a run become token rows with the exact ids
// of every turn (observations with loss 0), and the run trains on them.
func TestSFTFromTraces(t *testing.T) {
	runDir, out := t.TempDir(), t.TempDir()
	writeTraces(t, runDir)
	_, stderr, err := run(t, "sft", "--from-traces", runDir, "--min-reward", "1", "--data-only", "trainer.default_local_dir="+out)
	if err != nil {
		t.Fatalf("sft --from-traces: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "1 trajectories written") || !strings.Contains(stderr, "1 failed") || !strings.Contains(stderr, "1 duplicates") {
		t.Errorf("summary: %s", stderr)
	}
	var rows []map[string]any
	if err := data.ReadTableFunc(filepath.Join(out, "data", "traces.parquet"), func(i int, r map[string]any) error {
		rows = append(rows, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 {
		t.Fatalf("%d rows, want 1", len(rows))
	}
	ids, mask := fmt.Sprint(rows[0]["input_ids"]), fmt.Sprint(rows[0]["loss_mask"])
	if ids != "[1 2 3 10 257 4 5 20 21 257]" || mask != "[0 0 0 1 1 0 0 1 1 1]" || rows[0]["reward"] != 1.0 {
		t.Errorf("row: ids %s mask %s reward %v", ids, mask, rows[0]["reward"])
	}
	// and a run on them (the tiny test model: ids below its 258)
	out2 := t.TempDir()
	_, stderr, err = run(t, "sft", "--from-traces", runDir, "--min-reward", "0", "trainer.default_local_dir="+out2,
		"model.partial_pretrain=../../host/sft/testdata/tiny-chat", "data.train_batch_size=2", "trainer.total_training_steps=1",
		"trainer.logger=[jsonl]")
	if err != nil {
		t.Fatalf("sft --from-traces: %v\n%s", err, stderr)
	}
	if _, err := os.Stat(filepath.Join(out2, "checkpoints", "global_step_1", "model.safetensors")); err != nil {
		t.Error(err)
	}
	if _, _, err := run(t, "sft", "--from-traces", runDir, "--min-reward", "5", "--data-only", "trainer.default_local_dir="+t.TempDir()); err == nil ||
		!strings.Contains(err.Error(), "no trajectory to train on") {
		t.Errorf("no trajectory above the reward: %v", err)
	}
}

// TestSFTCompare: the comparison figure and table of two runs' validation reward and tool use.
func TestSFTCompare(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(a, "metrics.jsonl"),
		`{"step":0,"time":"2026-01-01T00:00:00Z","data":{"val-core/openai/gsm8k/reward/mean@1":0.1,"val-aux/tool_call_fraction":0.75}}`+"\n"+
			`{"step":1,"time":"2026-01-01T00:01:00Z","data":{"tool_calls/mean":1.5}}`+"\n")
	writeFile(t, filepath.Join(b, "metrics.jsonl"),
		`{"step":0,"time":"2026-01-01T00:00:00Z","data":{"val-core/openai/gsm8k/reward/mean@1":-0.05,"val-aux/tool_call_fraction":0}}`+"\n")
	out := filepath.Join(t.TempDir(), "cmp.png")
	stdout, stderr, err := run(t, "sft", "compare", "--out", out, "cold="+a, "base="+b)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "     0       0.100               0.750") || !strings.Contains(stdout, "     0      -0.050               0.000") {
		t.Errorf("table:\n%s", stdout)
	}
	if st, err := os.Stat(out); err != nil || st.Size() == 0 {
		t.Errorf("figure: %v", err)
	}
	if _, _, err := run(t, "sft", "compare", "nolabel"); err == nil {
		t.Error("an argument without LABEL= was accepted")
	}
}
