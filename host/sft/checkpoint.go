package sft

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/rlhost/rlhost/gpu/gguf"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/ckpt"
	"github.com/rlhost/rlhost/host/metrics"
)

// A checkpoint is RUN_DIR/checkpoints/global_step_N: a Hugging Face model directory that
// transformers and rlhost train (actor_rollout_ref.model.path) load as they are —
// model.safetensors + config.json, and the tokenizer (tokenizer.json, tokenizer_config.json
// with the chat template; converted from the GGUF when the run started from one). With LoRA
// the model is the merged one and lora_adapter/ holds the adapters in peft's layout. It is
// written to a temporary directory and renamed.

func (t *Trainer) checkpoint() error {
	final := ckpt.StepDir(t.runDir, t.step)
	tmp := final + ".tmp"
	os.RemoveAll(tmp)
	ck := t.model.Params.Checkpoint(t.model.HF)
	if t.model.LoRA() != nil {
		if err := t.model.SaveLoRA(filepath.Join(tmp, "lora_adapter"), t.cfg.Model.PartialPretrain); err != nil {
			return err
		}
		ck = t.model.MergedCheckpoint()
	}
	if err := weights.Save(tmp, ck); err != nil {
		return err
	}
	if err := WriteTokenizer(tmp, t.cfg.Model.PartialPretrain); err != nil {
		return err
	}
	if err := ckpt.Commit(tmp, final); err != nil {
		return err
	}
	t.LastCheckpoint = final
	fmt.Fprintf(t.opts.Progress, "checkpoint: %s\n", final)
	if k := t.cfg.Trainer.MaxCkptToKeep; k != nil {
		ckpt.Prune(t.runDir, *k)
	}
	return nil
}

// tokenizerFiles are the files of a Hugging Face model directory that make its tokenizer.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
	"generation_config.json"}

// WriteTokenizer writes the tokenizer of the model at src (a GGUF file or a Hugging Face
// directory) into the model directory dir, so that tokenizer.Load(dir) gives the same
// tokenizer: a directory's files are copied; a GGUF's tokenizer is converted
// (tokenizer.FromGGUF) into tokenizer.json and tokenizer_config.json.
func WriteTokenizer(dir, src string) error {
	st, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	if st.IsDir() {
		for _, name := range tokenizerFiles {
			b, err := os.ReadFile(filepath.Join(src, name))
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("sft: %w", err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				return fmt.Errorf("sft: %w", err)
			}
		}
		return nil
	}
	f, err := gguf.Open(src)
	if err != nil {
		return fmt.Errorf("sft: the tokenizer of %s: %w", src, err)
	}
	defer f.Close()
	tj, cfg, err := tokenizer.FromGGUF(f)
	if err != nil {
		return err
	}
	tc := map[string]any{}
	for k, v := range map[string]string{"bos_token": cfg.BOS, "eos_token": cfg.EOS, "pad_token": cfg.Pad, "unk_token": cfg.Unk, "chat_template": cfg.ChatTemplate} {
		if v != "" {
			tc[k] = v
		}
	}
	tc["tokenizer_class"] = "PreTrainedTokenizerFast"
	b, err := json.MarshalIndent(tc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tj, 0o644); err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), b, 0o644); err != nil {
		return fmt.Errorf("sft: %w", err)
	}
	return nil
}

// PlotRun draws RUN_DIR/curves.png of an SFT run: the training and validation loss, the
// gradient norm and the learning rate against the step.
func PlotRun(runDir string) (string, error) {
	steps, err := metrics.ReadJSONL(filepath.Join(runDir, "metrics.jsonl"))
	if err != nil && !errors.Is(err, metrics.ErrTornLine) {
		return "", err
	}
	col := func(key string) (xs, ys []float64) {
		for _, s := range steps {
			if v, ok := s.Values[key]; ok {
				xs, ys = append(xs, float64(s.Step)), append(ys, v)
			}
		}
		return xs, ys
	}
	lx, ly := col(MetricLoss)
	vx, vy := col(MetricValLoss)
	gx, gy := col(MetricGradNorm)
	rx, ry := col(MetricLR)
	out := filepath.Join(runDir, "curves.png")
	err = metrics.PlotFigure(out, "SFT", []metrics.Panel{
		{Title: "Loss (assistant tokens)", YLabel: "cross-entropy", Series: []metrics.Series{
			{Label: "train", X: lx, Y: ly}, {Label: "validation", X: vx, Y: vy, Markers: true}}},
		{Title: "Gradient norm", YLabel: "norm (before clipping)", Series: []metrics.Series{{Label: "grad norm", X: gx, Y: gy}}},
		{Title: "Learning rate", YLabel: "lr", Series: []metrics.Series{{Label: "lr", X: rx, Y: ry}}},
	})
	return out, err
}
