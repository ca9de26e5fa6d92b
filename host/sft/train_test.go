package sft

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rlhost/rlhost/gpu/model/modeltest"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/data"
	"github.com/rlhost/rlhost/host/metrics"
)

// writeSFTData writes n arithmetic conversations with a tool call (and two bad rows) as
// veRL SFT parquet.
func writeSFTData(t *testing.T, path string, n int) {
	t.Helper()
	tools := `[{"type": "function", "function": {"name": "calc", "description": "Evaluate.", "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}]`
	var rows []map[string]any
	for i := 0; i < n; i++ {
		a, b := i%7+2, i%5+3
		rows = append(rows, map[string]any{"tools": tools, "messages": []any{
			map[string]any{"role": "user", "content": fmt.Sprintf("%d*%d?", a, b)},
			map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"type": "function",
				"function": map[string]any{"name": "calc", "arguments": fmt.Sprintf(`{"expression": "%d*%d"}`, a, b)}}}},
			map[string]any{"role": "tool", "content": fmt.Sprint(a * b)},
			map[string]any{"role": "assistant", "content": fmt.Sprintf("#### %d", a*b)},
		}})
	}
	rows = append(rows,
		map[string]any{"tools": nil, "messages": []any{map[string]any{"role": "user", "content": "no answer"}}},
		map[string]any{"tools": tools, "messages": []any{map[string]any{"role": "user", "content": "x"},
			map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{"type": "function",
				"function": map[string]any{"name": "rm_rf", "arguments": "{}"}}}}}})
	if err := data.WriteTable(path, []string{"messages", "tools"}, rows); err != nil {
		t.Fatal(err)
	}
}

// TestTrainRun: a full SFT run on the tiny model: bad rows are skipped and reported with file
// and row, the training loss falls, the validation loss is logged before and after, and the
// checkpoint is a model directory that loads (weights and tokenizer) with the trained weights.
func TestTrainRun(t *testing.T) {
	for _, lora := range []bool{false, true} {
		t.Run(fmt.Sprintf("lora=%v", lora), func(t *testing.T) {
			dir := t.TempDir()
			train, val := filepath.Join(dir, "train.parquet"), filepath.Join(dir, "val.parquet")
			writeSFTData(t, train, 8)
			writeSFTData(t, val, 2)
			over := []string{"data.train_files=" + train, "data.val_files=" + val, "model.partial_pretrain=" + tinyChat,
				"trainer.default_local_dir=" + filepath.Join(dir, "run"), "data.train_batch_size=4", "data.micro_batch_size_per_gpu=3",
				"trainer.total_epochs=4", "optim.lr=1e-2", "trainer.logger=[jsonl]", "trainer.save_freq=4"}
			if lora {
				over = append(over, "model.lora_rank=8", "model.lora_alpha=16", "optim.lr=5e-2")
			}
			cfg, err := Load(nil, over)
			if err != nil {
				t.Fatal(err)
			}
			var progress strings.Builder
			tr, err := New(context.Background(), cfg, Options{Progress: &progress})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()
			if tr.TrainStats.Used != 8 || tr.TrainStats.Reasons[ReasonNoAssistant] != 1 || tr.TrainStats.Reasons[ReasonUnknownTool] != 1 {
				t.Errorf("train data: %s", tr.TrainStats.Summary())
			}
			if !strings.Contains(progress.String(), train+": row 8: no_assistant_turn") {
				t.Errorf("the skipped row is not reported with its file and row:\n%s", progress.String())
			}
			if tr.TotalSteps() != 8 {
				t.Fatalf("%d steps, want 8", tr.TotalSteps())
			}
			if err := tr.Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			steps, err := metrics.ReadJSONL(filepath.Join(dir, "run", "metrics.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			first, last := steps[1].Values[MetricLoss], steps[len(steps)-1].Values[MetricLoss]
			before, after := tr.ValLoss()
			// The adapters start at zero and move the tiny model more slowly in 8 steps.
			fall := 0.3
			if lora {
				fall = 0.1
			}
			if !(last < (1-fall)*first) || !(after < (1-fall)*before) {
				t.Errorf("loss %.3f -> %.3f, validation %.3f -> %.3f: want both to fall by %.0f%%", first, last, before, after, 100*fall)
			}
			t.Logf("loss %.3f -> %.3f, validation %.3f -> %.3f", first, last, before, after)
			ckDir := filepath.Join(dir, "run", "checkpoints", "global_step_8")
			if tr.LastCheckpoint != ckDir {
				t.Errorf("last checkpoint %s, want %s", tr.LastCheckpoint, ckDir)
			}
			if _, err := os.Stat(filepath.Join(dir, "run", "checkpoints", "global_step_4")); err != nil {
				t.Error(err)
			}
			if _, err := os.Stat(filepath.Join(dir, "run", "curves.png")); err != nil {
				t.Error(err)
			}
			ck, err := weights.Load(ckDir)
			if err != nil {
				t.Fatal(err)
			}
			want := tr.Model().Params.Checkpoint(tr.Model().HF)
			if lora {
				want = tr.Model().MergedCheckpoint()
				if _, err := os.Stat(filepath.Join(ckDir, "lora_adapter", "adapter_model.safetensors")); err != nil {
					t.Error(err)
				}
			}
			for name, w := range want.Tensors {
				g := ck.Tensors[name]
				if g == nil || modeltest.MaxRelErr(g.Data, w.Data) != 0 {
					t.Errorf("checkpoint tensor %s differs from the trained model", name)
				}
			}
			tk, err := tokenizer.Load(ckDir)
			if err != nil {
				t.Fatal(err)
			}
			defer tk.Close()
			if tk.EOS() != 257 || tk.ChatTemplate() == "" {
				t.Errorf("the checkpoint's tokenizer: eos %d, template %d bytes", tk.EOS(), len(tk.ChatTemplate()))
			}
		})
	}
}

func TestRunDirRefused(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "metrics.jsonl"), []byte("{}\n"), 0o644)
	cfg, err := Load(nil, []string{"data.train_files=x.parquet", "trainer.default_local_dir=" + dir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(context.Background(), cfg, Options{}); err == nil || !strings.Contains(err.Error(), "already holds a run") {
		t.Errorf("New in a used run directory: %v", err)
	}
}
