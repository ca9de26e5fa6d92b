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
// which preprocess writes to sft/SPLIT.parquet and leaves out of the RL rows.
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
	err = data.ReadTableFunc(filepath.Join(out, "sft", "train.parquet"), func(i int, row map[string]any) error {
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
		file := filepath.Join(out, "sft", split.name+".parquet")
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

// TestSFTFromTracesOfDemoRun: a run of the demo's configuration (examples/configs/gsm8k-demo.yaml)
// with the default trace settings (the local store, token2text on), made tiny (one step of 2
// prompts x 2 rollouts, 24 tokens), gives its trajectories to `rlhost sft --from-traces` as
// the README does: every training trajectory becomes a token row with the exact ids the
// model drew, and `rlhost traces export` writes the same ids beside the decoded text.
func TestSFTFromTracesOfDemoRun(t *testing.T) {
	if testing.Short() {
		t.Skip("trains the default model")
	}
	dir := filepath.Join(t.TempDir(), "demo")
	args := tinyRun(t, dir, "-c", filepath.Join("..", "..", "examples", "configs", "gsm8k-demo.yaml"),
		"trainer.total_training_steps=1", "trainer.val_before_train=false", "trainer.test_freq=-1",
		"reward_model.reward_kwargs.overlong_buffer_cfg.len=8") // the demo's 64 of 256 tokens, for 24
	if _, stderr, err := run(t, args...); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	out := t.TempDir()
	// README.md: bin/rlhost sft --from-traces runs/rlhost/gsm8k --min-reward 1 (the lowest reward
	// here, so that every trajectory of the tiny run is kept)
	_, stderr, err := run(t, "sft", "--from-traces", dir, "--min-reward", "-1", "--data-only", "trainer.default_local_dir="+out)
	if err != nil {
		t.Fatalf("sft --from-traces on a token2text run: %v\n%s", err, stderr)
	}
	if !strings.Contains(stderr, "4 trajectories written") {
		t.Errorf("want the 4 training trajectories written: %s", stderr)
	}
	rows := map[string]map[string]any{}
	if err := data.ReadTableFunc(filepath.Join(out, "data", "traces.parquet"), func(i int, r map[string]any) error {
		rows[r["trace_id"].(string)] = r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tk, err := tokenizer.Load(repoModel(t))
	if err != nil {
		t.Fatal(err)
	}
	st, err := local.OpenRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var payload, n float64
	st.DB().QueryRow(`SELECT sum(length(inputs) + length(outputs) + length(attributes)) FROM spans`).Scan(&payload)
	st.DB().QueryRow(`SELECT count(*) FROM trajectories`).Scan(&n)
	t.Logf("%.0f bytes of span payload per trajectory (token ids and text)", payload/n)
	f := false
	list, err := st.List(context.Background(), local.Filter{Validate: &f, Limit: 100})
	if err != nil || len(list) != 4 || len(rows) != 4 {
		t.Fatalf("%d training trajectories in the store (%v), %d token rows; want 4 and 4", len(list), err, len(rows))
	}
	for _, tr := range list {
		row := rows[tr.TraceID]
		if row == nil {
			t.Errorf("trajectory %s has no token row", tr.TraceID)
			continue
		}
		_, spans, err := st.Get(context.Background(), tr.TraceID)
		if err != nil {
			t.Fatal(err)
		}
		// the row's model tokens are the generate spans' response ids, and they decode to the
		// text stored beside them
		var model []int
		var text strings.Builder
		for _, s := range spans {
			if s.Name != "generate" {
				continue
			}
			var o struct {
				Text *string `json:"response"`
				IDs  []int   `json:"response_ids"`
			}
			if err := json.Unmarshal([]byte(s.Outputs), &o); err != nil || o.Text == nil || o.IDs == nil {
				t.Fatalf("generate span %s: outputs %s: want ids and text (%v)", s.SpanID, s.Outputs, err)
			}
			model = append(model, o.IDs...)
			text.WriteString(*o.Text)
			if got := tk.Decode(o.IDs, false); got != *o.Text {
				t.Errorf("generate span %s: its ids decode to %q, its text is %q", s.SpanID, got, *o.Text)
			}
		}
		ids, mask := row["input_ids"].([]any), row["loss_mask"].([]any)
		var masked []int
		for i := range ids {
			if mask[i] == int64(1) {
				masked = append(masked, int(ids[i].(int64)))
			}
		}
		if !reflect.DeepEqual(masked, model) || int64(len(ids)) != tr.PromptTokens+tr.ResponseTokens-int64(countDeltas(spans)) {
			t.Errorf("trajectory %s: loss tokens %v; want the generated %v (%d ids, %d prompt + %d response tokens)",
				tr.TraceID, masked, model, len(ids), tr.PromptTokens, tr.ResponseTokens)
		}
	}
	// traces export: ids and text in each row
	exp := filepath.Join(t.TempDir(), "traces.jsonl")
	if _, stderr, err := run(t, "traces", "export", "--run", dir, "--validate", "false", "-o", exp); err != nil {
		t.Fatalf("traces export: %v\n%s", err, stderr)
	}
	b, err := os.ReadFile(exp)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct {
			TraceID  string `json:"trace_id"`
			Prompt   string `json:"prompt"`
			Response string `json:"response"`
			local.Tokens
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		row := rows[e.TraceID]
		if row == nil || e.Prompt == "" || e.Response == "" || tk.Decode(e.PromptIDs, false) != e.Prompt {
			t.Errorf("export of %s: prompt %q, its ids decode to %q", e.TraceID, e.Prompt, tk.Decode(e.PromptIDs, false))
			continue
		}
		all := append(append([]int{}, e.PromptIDs...), e.ResponseIDs...)
		if got := fmt.Sprint(all); got != fmt.Sprint(row["input_ids"]) {
			t.Errorf("export of %s: ids %s; the sft row has %v", e.TraceID, got, row["input_ids"])
		}
	}
}

// countDeltas is how many tokens of the trajectory's prompts were the context already (the
// prompt_offset of each later turn): prompt_tokens counts them once per turn.
func countDeltas(spans []trace.Span) int {
	n := 0
	for _, s := range spans {
		if s.Name == "generate" {
			if off, ok := s.Attributes["prompt_offset"]; ok {
				n += int(off.(int64))
			}
		}
	}
	return n
}
