package sft

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/device"
	"github.com/rlhost/rlhost/host/metrics"
)

// Metric names (veRL's SFT trainer's where it has them).
const (
	MetricLoss       = "train/loss"
	MetricLR         = "train/lr"
	MetricGradNorm   = "train/grad_norm"
	MetricTokens     = "train/loss_tokens"
	MetricValLoss    = "val/loss"
	MetricThroughput = "perf/throughput"
	MetricStepTime   = "timing_s/step"
)

// Options are what the command line gives beside the config.
type Options struct {
	Log      hclog.Logger
	Progress io.Writer // progress lines and the step summary (stderr)
}

// Trainer runs one SFT run.
type Trainer struct {
	cfg    *Config
	opts   Options
	runDir string
	tk     *tokenizer.Tokenizer
	model  *model.Model
	opt    *model.AdamW
	acts   *model.ActsCache
	logger metrics.Logger

	train, val      []*Example
	TrainStats      *DataStats
	ValStats        *DataStats
	totalSteps      int
	stepsPerEpoch   int
	step            int
	LastCheckpoint  string
	lastValLoss     float64
	firstValLoss    float64
	validatedBefore bool
}

// New loads the tokenizer, the data and the model, and prepares the run directory.
func New(ctx context.Context, cfg *Config, opts Options) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if len(cfg.Data.TrainFiles) == 0 {
		return nil, fmt.Errorf("sft: no training data: set data.train_files")
	}
	t := &Trainer{cfg: cfg, opts: opts, runDir: cfg.RunDir(), firstValLoss: math.NaN(), lastValLoss: math.NaN()}
	if err := t.checkFreshRunDir(); err != nil {
		return nil, err
	}
	mpath := cfg.Model.PartialPretrain
	if mpath == config.DefaultModelPath { // the default model, wherever `make model` put it
		p, err := config.DefaultModel()
		if err != nil {
			return nil, fmt.Errorf("sft: model.partial_pretrain: %w", err)
		}
		mpath, cfg.Model.PartialPretrain = p, p
	}
	var err error
	if t.tk, err = tokenizer.Load(mpath); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			t.Close()
		}
	}()
	fmt.Fprintf(opts.Progress, "loading %s\n", mpath)
	ck, err := weights.Load(mpath)
	if err != nil {
		return nil, err
	}
	format, err := tokenizer.ParseToolFormat(cfg.Data.Multiturn.Format)
	if err != nil {
		return nil, fmt.Errorf("sft: data.multiturn.format: %v", err)
	}
	enc := &Encoder{Tok: t.tk, Kwargs: cfg.Data.ApplyChatTemplateKwargs, Format: format, MaxLength: cfg.Data.MaxLength,
		ToolCallsAsText: cfg.Data.Multiturn.ToolCallsAsText}
	vocab := ck.Config.VocabSize
	var st *DataStats
	if t.train, st, err = LoadFiles(cfg.Data.TrainFiles, enc, cfg, vocab, 0); err != nil {
		return nil, err
	}
	t.TrainStats = st
	t.report("train", st)
	if len(t.train) < cfg.Data.TrainBatchSize {
		return nil, fmt.Errorf("sft: %d usable training rows (%s), fewer than data.train_batch_size=%d", len(t.train), st.Summary(), cfg.Data.TrainBatchSize)
	}
	if len(cfg.Data.ValFiles) > 0 {
		if t.val, st, err = LoadFiles(cfg.Data.ValFiles, enc, cfg, vocab, cfg.Data.ValMaxSamples); err != nil {
			return nil, err
		}
		t.ValStats = st
		t.report("val", st)
		if len(t.val) == 0 {
			return nil, fmt.Errorf("sft: no usable validation rows in %v (%s)", cfg.Data.ValFiles, st.Summary())
		}
	}
	t.stepsPerEpoch = len(t.train) / cfg.Data.TrainBatchSize
	t.totalSteps = t.stepsPerEpoch * cfg.Trainer.TotalEpochs
	if cfg.Trainer.TotalTrainingSteps != nil {
		t.totalSteps = *cfg.Trainer.TotalTrainingSteps
	}

	be, err := openBackend(cfg, opts.Progress)
	if err != nil {
		return nil, err
	}
	if t.model, err = model.New(be, ck); err != nil {
		return nil, err
	}
	if mc := cfg.Model; mc.LoraRank > 0 {
		if err := t.model.EnableLoRA(model.LoRAConfig{Rank: mc.LoraRank, Alpha: float32(mc.LoraAlpha),
			Targets: mc.TargetModules, Seed: uint64(cfg.Trainer.Seed)}); err != nil {
			return nil, fmt.Errorf("sft: model: %w", err)
		}
	}
	t.acts = model.NewActsCache(t.model, 3)
	o := cfg.Optim
	t.opt = model.NewAdamW(t.model, model.AdamWConfig{LR: float32(o.LR), Beta1: float32(o.Betas[0]), Beta2: float32(o.Betas[1]),
		Eps: float32(o.Eps), WeightDecay: float32(o.WeightDecay), MaxGradNorm: float32(o.ClipGrad)})
	if err := os.MkdirAll(t.runDir, 0o755); err != nil {
		return nil, fmt.Errorf("sft: run directory: %w", err)
	}
	if err := cfg.WriteYAML(filepath.Join(t.runDir, "config.yaml")); err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	if err := t.writeSkipped(); err != nil {
		return nil, err
	}
	if t.logger, err = t.openLoggers(); err != nil {
		return nil, err
	}
	ok = true
	return t, nil
}

// openBackend opens trainer.device's backend; on CUDA the products compute as
// model.fsdp_config.mixed_precision.param_dtype says, and the path is printed.
func openBackend(cfg *Config, progress io.Writer) (gpu.Backend, error) {
	be, err := device.Open(cfg.Trainer.Device, ParamDtypeKey, cfg.Model.FSDPConfig.MixedPrecision.ParamDtype, progress)
	if err != nil {
		return nil, fmt.Errorf("sft: %w", err)
	}
	return be, nil
}

// report prints what the data gave, with the first skipped rows.
func (t *Trainer) report(split string, st *DataStats) {
	fmt.Fprintf(t.opts.Progress, "data (%s): %s\n", split, st.Summary())
	for i, s := range st.Skipped {
		if i == 5 {
			fmt.Fprintf(t.opts.Progress, "  ... (all skipped rows: %s)\n", filepath.Join(t.runDir, "skipped_rows.txt"))
			break
		}
		fmt.Fprintf(t.opts.Progress, "  skipped %s\n", s)
	}
}

// writeSkipped lists the skipped rows (the first 100 of each split) in the run directory.
func (t *Trainer) writeSkipped() error {
	var lines []byte
	for _, st := range []*DataStats{t.TrainStats, t.ValStats} {
		if st == nil {
			continue
		}
		for _, s := range st.Skipped {
			lines = append(lines, s.String()+"\n"...)
		}
	}
	if len(lines) == 0 {
		return nil
	}
	return os.WriteFile(filepath.Join(t.runDir, "skipped_rows.txt"), lines, 0o644)
}

// checkFreshRunDir refuses a run directory that already holds a run.
func (t *Trainer) checkFreshRunDir() error {
	for _, name := range []string{"metrics.jsonl", "checkpoints"} {
		if _, err := os.Stat(filepath.Join(t.runDir, name)); err == nil {
			return fmt.Errorf("sft: run directory %s already holds a run (%s): choose another trainer.default_local_dir "+
				"(or trainer.experiment_name), or remove the directory", t.runDir, name)
		}
	}
	return nil
}

func (t *Trainer) openLoggers() (metrics.Logger, error) {
	var ls []metrics.Logger
	for _, name := range t.cfg.Trainer.Logger {
		switch name {
		case "console":
			ls = append(ls, consoleLogger{t.opts.Progress})
		case "jsonl":
			l, err := metrics.NewJSONL(filepath.Join(t.runDir, "metrics.jsonl"))
			if err != nil {
				return nil, err
			}
			ls = append(ls, l)
		}
	}
	return metrics.Multi(ls...), nil
}

// RunDir is where the run writes.
func (t *Trainer) RunDir() string { return t.runDir }

// TotalSteps is the number of optimiser steps the run makes.
func (t *Trainer) TotalSteps() int { return t.totalSteps }

// Model is the model being trained.
func (t *Trainer) Model() *model.Model { return t.model }

// Close releases the tokenizer and the loggers.
func (t *Trainer) Close() {
	if t.tk != nil {
		t.tk.Close()
		t.tk = nil
	}
	if t.logger != nil {
		t.logger.Close()
		t.logger = nil
	}
}

// Run trains for the configured steps, validating and checkpointing as configured, and draws
// the curves at the end.
func (t *Trainer) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil && t.logger != nil {
			metrics.Fail(t.logger, err)
		}
	}()
	cfg := t.cfg
	if len(t.val) > 0 {
		v, err := t.validate()
		if err != nil {
			return err
		}
		t.firstValLoss = v
		if err := t.logger.Log(metrics.Step{Step: 0, Time: time.Now(), Values: map[string]float64{MetricValLoss: v}}); err != nil {
			return err
		}
	}
	order := make([]int, len(t.train))
	for i := range order {
		order[i] = i
	}
	bs := cfg.Data.TrainBatchSize
	for t.step < t.totalSteps {
		if err := ctx.Err(); err != nil {
			return err
		}
		step := t.step + 1
		epoch, pos := (step-1)/t.stepsPerEpoch, (step-1)%t.stepsPerEpoch
		if pos == 0 && cfg.Data.Shuffle {
			for i := range order {
				order[i] = i
			}
			r := rand.New(rand.NewPCG(uint64(cfg.Data.Seed), uint64(epoch)))
			r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		batch := make([]*Example, bs)
		for i := range batch {
			batch[i] = t.train[order[pos*bs+i]]
		}
		start := time.Now()
		t.model.ZeroGrads()
		res, err := accumulate(t.model, t.acts, batch, cfg.Data.MicroBatchSizePerGPU, true, false)
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		lr := lrSchedule(cfg.Optim, t.totalSteps).At(step, t.totalSteps)
		t.opt.Config.LR = float32(lr)
		norm, err := t.opt.Update(t.model)
		if err != nil {
			return fmt.Errorf("step %d: %w", step, err)
		}
		if math.IsNaN(norm) || math.IsInf(norm, 0) {
			return fmt.Errorf("step %d: sft: the gradient norm is %v", step, norm)
		}
		dt := time.Since(start).Seconds()
		vals := map[string]float64{MetricLoss: res.Loss, MetricLR: lr, MetricGradNorm: norm, MetricTokens: float64(res.Tokens),
			MetricStepTime: dt, MetricThroughput: float64(res.AllTokens) / dt, "train/epoch": float64(epoch)}
		last := step == t.totalSteps
		if len(t.val) > 0 && (last || cfg.Trainer.TestFreq > 0 && step%cfg.Trainer.TestFreq == 0) {
			v, err := t.validate()
			if err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
			vals[MetricValLoss] = v
		}
		t.step = step
		if err := t.logger.Log(metrics.Step{Step: step, Time: time.Now(), Values: vals}); err != nil {
			return err
		}
		if last || cfg.Trainer.SaveFreq > 0 && step%cfg.Trainer.SaveFreq == 0 {
			if err := t.checkpoint(); err != nil {
				return fmt.Errorf("step %d: checkpoint: %w", step, err)
			}
		}
	}
	if err := t.logger.Close(); err != nil {
		t.opts.Log.Warn("closing the metric loggers", "error", err)
	}
	t.logger = nil
	if png, err := PlotRun(t.runDir); err != nil {
		t.opts.Log.Warn("could not draw the curves", "error", err)
	} else {
		fmt.Fprintf(t.opts.Progress, "curves: %s\n", png)
	}
	return nil
}

// validate is the token-mean loss over the validation rows' assistant tokens.
func (t *Trainer) validate() (float64, error) {
	res, err := accumulate(t.model, t.acts, t.val, t.cfg.Data.MicroBatchSizePerGPU, false, false)
	if err != nil {
		return 0, fmt.Errorf("validation: %w", err)
	}
	t.lastValLoss = res.Loss
	return res.Loss, nil
}

// ValLoss is the validation loss before training and after the last validation (NaN without
// validation data).
func (t *Trainer) ValLoss() (before, after float64) { return t.firstValLoss, t.lastValLoss }

// consoleLogger prints one line per step with the SFT metrics.
type consoleLogger struct{ w io.Writer }

func (c consoleLogger) Log(s metrics.Step) error {
	line := fmt.Sprintf("step %d", s.Step)
	for _, k := range []struct{ key, name, format string }{
		{MetricLoss, "loss", "%.4f"}, {MetricValLoss, "val_loss", "%.4f"}, {MetricGradNorm, "grad_norm", "%.3f"},
		{MetricLR, "lr", "%.3g"}, {MetricThroughput, "tok/s", "%.1f"}, {MetricStepTime, "step_time", "%.1fs"},
	} {
		if v, ok := s.Values[k.key]; ok {
			line += fmt.Sprintf(" | %s "+k.format, k.name, v)
		}
	}
	_, err := fmt.Fprintln(c.w, line)
	return err
}

func (consoleLogger) Close() error { return nil }
