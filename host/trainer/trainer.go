package trainer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/chatserver"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/device"
	"github.com/rlhost/rlhost/host/metrics"
	"github.com/rlhost/rlhost/host/plugin"
	"github.com/rlhost/rlhost/host/progress"
	"github.com/rlhost/rlhost/host/reward"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/host/tracing"
	"github.com/rlhost/rlhost/sdk/task"
)

// Options are what the command line gives beside the config.
type Options struct {
	Log      hclog.Logger
	Progress io.Writer // progress bars and the step summary (stderr)
	Plugin   plugin.Options
}

// Trainer runs one training run.
type Trainer struct {
	cfg    *config.Config
	opts   Options
	log    hclog.Logger
	runDir string

	tasks   *taskSet
	tk      *tokenizer.Tokenizer
	render  rollout.Chat // tk with data.apply_chat_template_kwargs and the tool-call format
	actor   *model.Model
	ref     *model.Model // nil when no KL term needs it
	opt     *model.AdamW
	critic  *critic // nil without a critic (critic.enable, adv_estimator=gae)
	policy  *rollout.ModelPolicy
	chat    *chatserver.Server // external_episode tasks: the policy as an OpenAI endpoint
	engine  *engine            // rollout.name=openai: rollouts from an external engine (engine.go)
	acts    *model.ActsCache
	refActs *model.ActsCache
	rew     reward.Manager
	rm      *rewardScorer // reward_model.enable; nil otherwise
	judge   *judgeRun     // reward_model.judge.backend != none; nil otherwise
	klCtl   algo.KLController
	logger  metrics.Logger
	tracer  *tracing.Tracer

	train, val []example
	sampler    *sampler
	step       int // last finished step
	totalSteps int

	// The failure budget (trainer.max_failed_fraction, trainer.max_consecutive_failed_steps):
	// skipped counts the skipped steps in a row, streakErr says what failed first in that
	// streak, ran and trained count the steps this Run went through and trained on.
	skipped      int
	streakErr    string
	ran, trained int
}

// New prepares a run: the task plugin, the model and tokenizer, the data, the run directory.
func New(ctx context.Context, cfg *config.Config, opts Options) (*Trainer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.Log == nil {
		opts.Log = hclog.NewNullLogger()
	}
	if opts.Progress == nil {
		opts.Progress = io.Discard
	}
	if len(cfg.TaskNames()) == 0 {
		return nil, fmt.Errorf("trainer: no task: pass --task NAME (or set task.name)")
	}
	ac := cfg.ActorRolloutRef.Actor
	for _, err := range []error{algo.CheckEstimator(cfg.Algorithm.AdvEstimator), algo.CheckAggMode(ac.LossAggMode), algo.CheckKLKind(ac.KLLossType), algo.CheckKLKind(cfg.Algorithm.KLPenalty),
		algo.PolicyLossConfig{ClipLow: cfg.ClipRatioLow(), ClipHigh: cfg.ClipRatioHigh(), ClipC: ac.ClipRatioC, AggMode: ac.LossAggMode}.Check()} {
		if err != nil {
			return nil, fmt.Errorf("trainer: %w", err)
		}
	}
	if cfg.Data.PromptKey != "" && cfg.Data.PromptKey != "prompt" {
		return nil, fmt.Errorf("trainer: data.prompt_key=%s: rlhost reads the prompt column of veRL's schema; rename the column to \"prompt\"", cfg.Data.PromptKey)
	}
	t := &Trainer{cfg: cfg, opts: opts, log: opts.Log, runDir: cfg.RunDir()}
	for _, w := range cfg.Warnings() {
		t.log.Warn(w)
	}
	ok := false
	defer func() {
		if !ok {
			t.Close()
		}
	}()
	if cfg.Trainer.ResumeMode == "disable" {
		if err := t.checkFreshRunDir(); err != nil {
			return nil, err
		}
	}
	if err := os.MkdirAll(t.runDir, 0o755); err != nil {
		return nil, fmt.Errorf("trainer: run directory: %w", err)
	}
	if err := writeFileAtomic(filepath.Join(t.runDir, "config.yaml"), func(w io.Writer) error { return cfg.WriteYAML(w) }); err != nil {
		return nil, err
	}

	be, err := device.Open(cfg.Trainer.Device, "actor_rollout_ref.actor.dtype", cfg.ActorRolloutRef.Actor.Dtype, opts.Progress)
	if err != nil {
		return nil, fmt.Errorf("trainer: %w", err)
	}
	hs, err := t.startJudgeService()
	if err != nil {
		return nil, err
	}
	if t.tasks, err = openTasks(ctx, cfg, opts.Plugin, hs, t.log); err != nil {
		return nil, err
	}
	for _, rt := range t.tasks.list {
		if err := checkIsolation(ctx, rt.p, rt.name, cfg.Task.AllowWeakIsolation, opts.Progress); err != nil {
			return nil, err
		}
	}
	mpath := cfg.ActorRolloutRef.Model.Path
	if t.tk, err = tokenizer.Load(mpath); err != nil {
		return nil, err
	}
	if src := cfg.ActorRolloutRef.Model.CustomChatTemplate; src != "" {
		if err := t.tk.SetChatTemplate(src, "actor_rollout_ref.model.custom_chat_template"); err != nil {
			return nil, fmt.Errorf("trainer: %w", err)
		}
	}
	fmt.Fprintf(opts.Progress, "loading %s\n", mpath)
	ck, err := weights.Load(mpath)
	if err != nil {
		return nil, err
	}
	if t.actor, err = model.New(be, ck); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Progress, "model %s\n", t.actor.Config.Describe())
	if err := checkVocab(t.tk, t.actor.Config, mpath); err != nil {
		return nil, err
	}
	FallBackEOS(opts.Progress, mpath, t.actor, t.tk)
	format, formatLine, err := rollout.ResolveToolFormat(t.tk, cfg.ActorRolloutRef.Rollout.MultiTurn.Format)
	if err != nil {
		return nil, err
	}
	if format == tokenizer.ToolFormatHermes && cfg.ActorRolloutRef.Rollout.MultiTurn.Format == "auto" {
		formatLine = "" // the default as before: nothing new to say
	}
	t.render = rollout.Chat{Tok: t.tk, Kwargs: cfg.Data.ApplyChatTemplateKwargs, Format: format}
	needRef := cfg.ActorRolloutRef.Actor.UseKLLoss || cfg.Algorithm.UseKLInReward
	if mc := cfg.ActorRolloutRef.Model; mc.LoraRank > 0 {
		// LoRA: the base is frozen, so the reference policy is the actor with its adapters off.
		if err := t.actor.EnableLoRA(model.LoRAConfig{Rank: mc.LoraRank, Alpha: float32(mc.LoraAlpha),
			Targets: mc.TargetModules, Seed: uint64(cfg.Trainer.Seed)}); err != nil {
			return nil, fmt.Errorf("trainer: actor_rollout_ref.model: %w", err)
		}
		if needRef {
			t.ref = t.actor
			t.refActs = model.NewActsCache(t.actor, 4)
		}
	} else if needRef {
		if t.ref, err = model.New(be, ck); err != nil {
			return nil, err
		}
		t.refActs = model.NewActsCache(t.ref, 4)
	}
	if cfg.CriticEnabled() {
		if t.critic, err = openCritic(be, cfg.Critic, mpath, ck, t.actor, t.tk); err != nil {
			return nil, err
		}
	}
	ck = nil
	if cfg.RewardModel.Enable {
		fmt.Fprintf(opts.Progress, "loading reward model %s\n", cfg.RewardModel.Model.Path)
		if t.rm, err = openRewardModel(be, cfg.RewardModel, t.tk); err != nil {
			return nil, err
		}
	}
	t.acts = model.NewActsCache(t.actor, 4)
	o := cfg.ActorRolloutRef.Actor.Optim
	betas := o.Betas
	if len(betas) != 2 {
		betas = []float64{0.9, 0.999}
	}
	eps := o.Eps
	if eps == 0 {
		eps = 1e-8
	}
	t.opt = model.NewAdamW(t.actor, model.AdamWConfig{LR: float32(o.LR), Beta1: float32(betas[0]), Beta2: float32(betas[1]),
		Eps: float32(eps), WeightDecay: float32(o.WeightDecay), MaxGradNorm: float32(cfg.ActorRolloutRef.Actor.GradClip)})
	maxT := cfg.PromptLength() + cfg.ResponseLength() + 8
	if err := t.openEngine(); err != nil {
		return nil, err
	} else if t.engine == nil {
		if t.policy, err = rollout.NewModelPolicy(t.actor, cfg.ActorRolloutRef.Rollout.MaxNumSeqs, maxT); err != nil {
			return nil, err
		}
		d, err := t.policy.SetDtype(cfg.ActorRolloutRef.Rollout.Dtype)
		if err != nil {
			return nil, fmt.Errorf("trainer: actor_rollout_ref.rollout.dtype: %w", err)
		}
		if cfg.ActorRolloutRef.Rollout.Dtype == "auto" {
			fmt.Fprintf(opts.Progress, "rollout weights: %v (actor_rollout_ref.rollout.dtype=auto; CPU kernels: %v)\n", d, cpu.BestLowpISA)
		}
	}
	if err := t.setJudge(be, maxT, opts.Progress); err != nil {
		return nil, err
	}
	if t.tasks.has(task.FeatureExternalEpisode) {
		t.chat = chatserver.New(t.rolloutPolicy(), t.tk, chatserver.Options{MaxContext: maxT,
			TemplateKwargs: t.render.Kwargs, ToolFormat: t.render.Format})
		if err := t.chat.Start(); err != nil {
			return nil, err
		}
	}

	ob, err := cfg.OverlongBuffer()
	if err != nil {
		return nil, err
	}
	weightsCfg := map[string]float64{}
	for k, v := range cfg.RewardModel.RewardWeights {
		switch x := v.(type) {
		case int:
			weightsCfg[k] = float64(x)
		case int64:
			weightsCfg[k] = float64(x)
		case float64:
			weightsCfg[k] = x
		default:
			return nil, fmt.Errorf("trainer: reward_model.reward_weights.%s = %v: want a number", k, v)
		}
	}
	t.rew, err = reward.New(reward.Config{Kind: cfg.RewardModel.RewardManager, Workers: cfg.RewardModel.NumWorkers,
		Timeout: time.Duration(cfg.ScoreTimeout() * float64(time.Second)), Weights: weightsCfg,
		Overlong: reward.Overlong{Enable: ob.Enable, MaxLen: cfg.ResponseLength(), Buffer: ob.Len, PenaltyFactor: ob.PenaltyFactor}})
	if err != nil {
		return nil, err
	}
	kc := cfg.Algorithm.KLCtrl
	if kc.Type == "adaptive" {
		t.klCtl = algo.NewAdaptiveKLController(kc.KLCoef, kc.TargetKL, kc.Horizon)
	} else {
		t.klCtl = algo.NewFixedKLController(kc.KLCoef)
	}

	d := cfg.Data
	defLoop := cfg.ActorRolloutRef.Rollout.Agent.DefaultAgentLoop
	if !cfg.Trainer.ValOnly {
		bar := progress.New(opts.Progress, "prompts (train)", 0, "rows")
		bar.Waiting(t.tasks.waitingOn)
		var filtered int
		t.train, filtered, err = loadExamples(ctx, "data.train_files", d.TrainFiles, t.render, t.tasks, defLoop, cfg.PromptLength(), d.FilterOverlongPrompts, d.Truncation, 0, bar)
		if err != nil {
			return nil, err
		}
		if filtered > 0 {
			t.log.Info("dropped overlong training prompts", "rows", filtered, "max_prompt_length", cfg.PromptLength())
		}
		if len(t.train) < d.TrainBatchSize {
			return nil, fmt.Errorf("trainer: %d usable training rows, fewer than data.train_batch_size=%d", len(t.train), d.TrainBatchSize)
		}
		if t.sampler, err = newSamplerFor(t.train, d.TrainBatchSize, d.Seed, d.Shuffle, cfg.SamplingWeights()); err != nil {
			return nil, err
		}
		t.totalSteps = t.sampler.StepsPerEpoch() * cfg.Trainer.TotalEpochs
		if cfg.Trainer.TotalTrainingSteps != nil {
			t.totalSteps = *cfg.Trainer.TotalTrainingSteps
		}
	}
	if len(d.ValFiles) > 0 {
		limit := 0
		if d.ValMaxSamples != nil {
			limit = *d.ValMaxSamples
		}
		t.val, _, err = loadExamples(ctx, "data.val_files", d.ValFiles, t.render, t.tasks, defLoop, cfg.PromptLength(), true, d.Truncation, limit, nil)
		if err != nil {
			return nil, err
		}
	}
	if err := t.warnDroppedTools(opts.Progress, mpath, defLoop, formatLine); err != nil {
		return nil, err
	}
	if err := t.resume(); err != nil {
		return nil, err
	}
	if t.logger, err = t.openLoggers(ctx); err != nil {
		return nil, err
	}
	if t.tracer, err = t.openTracer(ctx); err != nil {
		return nil, err
	}
	ok = true
	return t, nil
}

// warnDroppedTools prints, once per run, the tool-call format (formatLine; "" prints none) and a
// warning when the chat template does not show the model the tools of the first tool_agent
// prompt that has tools (tools vanish in silence otherwise: the schemas are dropped, the run
// goes on).
func (t *Trainer) warnDroppedTools(w io.Writer, mpath, defLoop, formatLine string) error {
	for _, set := range [][]example{t.train, t.val} {
		for _, e := range set {
			loop := e.Row.AgentName
			if loop == "" {
				loop = defLoop
			}
			if loop != rollout.ToolAgent || len(e.Prompt.Tools) == 0 {
				continue
			}
			if formatLine != "" {
				fmt.Fprintln(w, formatLine)
			}
			ok, err := t.render.ToolsRendered(e.Prompt.Messages, e.Prompt.Tools)
			if err != nil {
				return err
			}
			if !ok {
				fmt.Fprintln(w, t.render.DroppedToolsWarning(mpath, "task "+e.task.name, e.Prompt.Tools))
			}
			return nil
		}
	}
	return nil
}

// openTracer starts the trace backends of actor_rollout_ref.rollout.trace (the local store by
// default). A default local backend that is not installed only warns; a backend the config
// names must start.
func (t *Trainer) openTracer(ctx context.Context) (*tracing.Tracer, error) {
	tc := t.cfg.ActorRolloutRef.Rollout.Trace
	token2text := tracing.Token2TextDefault(tc.Backend)
	if tc.Token2Text != nil {
		token2text = *tc.Token2Text
	}
	cfg := tracing.Config{Backends: tc.Backend, Token2Text: token2text, Seed: int64(t.cfg.Trainer.Seed),
		Project: t.cfg.Trainer.ProjectName, Experiment: t.cfg.Experiment(), RunName: t.cfg.Experiment(),
		RunID: filepath.Base(t.runDir), RunDir: t.runDir, Logger: t.log,
		Decode:        func(ids []int) string { return t.tk.Decode(ids, false) },
		BackendConfig: map[string]map[string]any{}}
	if tc.MaxSamplesPerStep != nil {
		cfg.MaxSamplesPerStep = *tc.MaxSamplesPerStep
	}
	if id := metrics.RunID(t.logger); id != "" {
		uri := os.Getenv("MLFLOW_TRACKING_URI")
		if t.cfg.Trainer.MLflowTrackingURI != nil {
			uri = *t.cfg.Trainer.MLflowTrackingURI
		}
		cfg.BackendConfig["mlflow"] = map[string]any{"run_id": id, "tracking_uri": uri}
	}
	if b, err := json.Marshal(t.cfg.Redacted()); err == nil {
		cfg.RunConfigJSON = string(b)
	}
	tr, err := tracing.New(ctx, cfg, tracing.OpenPlugin(t.opts.Plugin))
	if err != nil && len(tc.Backend) == 0 && errors.Is(err, plugin.ErrNotInstalled) {
		t.log.Warn("rollout tracing is off: the default local trace backend (rlhost-trace-local) is not installed", "error", err)
		return nil, nil
	}
	return tr, err
}

// RunDir is where the run writes.
func (t *Trainer) RunDir() string { return t.runDir }

// Close releases the plugin, the policy and the loggers.
func (t *Trainer) Close() {
	if t.chat != nil {
		t.chat.Close()
	}
	if t.policy != nil {
		t.policy.Close()
	}
	if t.tasks != nil {
		t.tasks.Close()
	}
	if t.judge != nil {
		t.judge.close()
	}
	if t.tk != nil {
		t.tk.Close()
	}
	if t.rm != nil {
		t.rm.close()
	}
	if t.tracer != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := t.tracer.Close(ctx); err != nil {
			t.log.Warn("closing the trace backends", "error", err)
		}
		cancel()
		t.tracer = nil
	}
	if t.logger != nil {
		t.logger.Close()
		t.logger = nil
	}
}

func (t *Trainer) openLoggers(ctx context.Context) (metrics.Logger, error) {
	var ls []metrics.Logger
	for _, name := range t.cfg.Trainer.Logger {
		switch name {
		case "console":
			ls = append(ls, metrics.NewConsole(t.opts.Progress))
		case "jsonl":
			l, err := metrics.NewJSONL(filepath.Join(t.runDir, "metrics.jsonl"))
			if err != nil {
				return nil, err
			}
			ls = append(ls, l)
		case "mlflow":
			uri := os.Getenv("MLFLOW_TRACKING_URI")
			if t.cfg.Trainer.MLflowTrackingURI != nil {
				uri = *t.cfg.Trainer.MLflowTrackingURI
			}
			if uri == "" {
				return nil, fmt.Errorf("trainer: trainer.logger has mlflow but no server: set trainer.mlflow_tracking_uri or MLFLOW_TRACKING_URI")
			}
			l, err := metrics.NewMLflow(ctx, metrics.MLflowConfig{TrackingURI: uri, Experiment: t.cfg.Trainer.ProjectName,
				RunName: t.cfg.Experiment(), Params: flatten(t.cfg.Redacted())})
			if err != nil {
				return nil, err
			}
			ls = append(ls, l)
		default:
			return nil, fmt.Errorf("trainer: trainer.logger: unknown logger %q (known: console, jsonl, mlflow)", name)
		}
	}
	return metrics.Multi(ls...), nil
}

func flatten(m map[string]any) map[string]string {
	out := map[string]string{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if mm, ok := v.(map[string]any); ok {
			for k, x := range mm {
				p := k
				if prefix != "" {
					p = prefix + "." + k
				}
				walk(p, x)
			}
			return
		}
		out[prefix] = fmt.Sprint(v)
	}
	walk("", m)
	return out
}

// Run trains until the configured number of steps, validating and checkpointing as
// configured, and writes the curves at the end.
func (t *Trainer) Run(ctx context.Context) (err error) {
	defer func() {
		if err != nil && t.logger != nil {
			metrics.Fail(t.logger, err)
		}
	}()
	cfg := t.cfg.Trainer
	if cfg.ValOnly || (cfg.ValBeforeTrain && t.step == 0) {
		vals, err := t.validate(ctx, t.step)
		if err != nil {
			return err
		}
		if err := t.logger.Log(metrics.Step{Step: t.step, Time: time.Now(), Values: vals}); err != nil {
			return err
		}
		if cfg.ValOnly {
			return nil
		}
	}
	for t.step < t.totalSteps {
		if err := ctx.Err(); err != nil {
			return err
		}
		step := t.step + 1
		vals, err := t.trainStep(ctx, step)
		t.ran++
		var skip *skippedStep
		var stop error // the failure budget is spent
		switch {
		case errors.As(err, &skip):
			vals = skip.vals
			vals["training/skipped_step"] = 1
			stop = t.skip(step, skip)
		case err != nil:
			return fmt.Errorf("step %d: %w", step, err)
		default:
			t.skipped, t.streakErr = 0, ""
			t.trained++
			if err := t.afterStepEngine(ctx, step, vals); err != nil {
				return fmt.Errorf("step %d: %w", step, err)
			}
		}
		last := step == t.totalSteps
		if skip == nil && cfg.TestFreq > 0 && (step%cfg.TestFreq == 0 || last) {
			v, err := t.validate(ctx, step)
			if err != nil {
				return fmt.Errorf("step %d: validation: %w", step, err)
			}
			for k, x := range v {
				vals[k] = x
			}
		}
		t.step = step
		if err := t.logger.Log(metrics.Step{Step: step, Time: time.Now(), Values: vals}); err != nil {
			return err
		}
		if stop != nil {
			return stop
		}
		if cfg.SaveFreq > 0 && (step%cfg.SaveFreq == 0 || last) {
			if err := t.checkpoint(); err != nil {
				return fmt.Errorf("step %d: checkpoint: %w", step, err)
			}
		}
	}
	if t.ran > 0 && t.trained == 0 {
		return fmt.Errorf("no step of the run was trained on (a step is not trained on when more than trainer.max_failed_fraction=%g "+
			"of its trajectories or rewards fail): %s", t.cfg.Trainer.MaxFailedFraction, t.streakErr)
	}
	if err := t.logger.Close(); err != nil {
		t.log.Warn("closing the metric loggers", "error", err)
	}
	t.logger = nil
	if !slices.Contains(t.cfg.Trainer.Logger, "jsonl") {
		return nil // the curves are drawn from metrics.jsonl, which this run did not write
	}
	if png, err := metrics.PlotRun(t.runDir); err != nil {
		t.log.Warn("could not draw the curves", "error", err)
	} else {
		fmt.Fprintf(t.opts.Progress, "curves: %s\n", png)
	}
	return nil
}

// samplesFor makes the n rollouts of each example.
func (t *Trainer) samplesFor(exs []*example, uidPrefix string, n, step int, validate bool) []*rollout.Sample {
	var out []*rollout.Sample
	for i, e := range exs {
		uid := fmt.Sprintf("%s-%d", uidPrefix, i)
		for r := 0; r < n; r++ {
			out = append(out, &rollout.Sample{Row: e.Row, Prompt: e.Prompt, UID: uid, SampleIndex: e.SampleIndex,
				RolloutN: r, Step: step, Validate: validate, PromptIDs: e.PromptIDs})
		}
	}
	return out
}

func (t *Trainer) rolloutDeps(rt *runTask, validate bool) rollout.Deps {
	r := t.cfg.ActorRolloutRef.Rollout
	mt := r.MultiTurn
	c := rollout.Config{ResponseLength: t.cfg.ResponseLength(), MaxParallelCalls: mt.MaxParallelCalls,
		MaxToolResponseLength: mt.MaxToolResponseLength, TruncateSide: mt.ToolResponseTruncateSide,
		DefaultAgentLoop: r.Agent.DefaultAgentLoop, TemplateKwargs: t.render.Kwargs, ToolFormat: t.render.Format,
		Interaction: rt.p.CachedInfo().Has(task.FeatureInteraction) && t.interactionOn(rt)}
	if mt.MaxAssistantTurns != nil {
		c.MaxAssistantTurns = *mt.MaxAssistantTurns
	}
	if mt.MaxUserTurns != nil {
		c.MaxUserTurns = *mt.MaxUserTurns
	}
	seed := uint64(t.cfg.RolloutSeed())
	if validate {
		vk := r.ValKwargs
		c.Sampling = rollout.SamplingParams{Temperature: vk.Temperature, TopP: vk.TopP, TopK: vk.TopK, Seed: seed}
		if !vk.DoSample {
			c.Sampling.Temperature = 0
		}
	} else {
		c.Sampling = rollout.SamplingParams{Temperature: r.Temperature, TopP: r.TopP, TopK: r.TopK, Seed: seed}
		if !r.DoSample {
			c.Sampling.Temperature = 0
		}
	}
	var env task.Environment
	if rt.p.CachedInfo().Has(task.FeatureEnvironment) && mt.Enable {
		env = rt.p
	}
	d := rollout.Deps{Policy: t.rolloutPolicy(), Tokenizer: t.tk, Env: env, Config: c, Tracer: t.tracer, TaskName: rt.p.Name()}
	if t.chat != nil && rt.p.CachedInfo().Has(task.FeatureExternalEpisode) { // external_episode: the environment calls the policy through t.chat
		d.Env = rt.p
		d.Config.DefaultAgentLoop = rollout.ExternalAgent
		d.External = rollout.NewExternalAgentLoop(d, t.chat, 0)
	}
	return d
}

// interactionOn: the user simulator runs when multi_turn.interaction_config_path is set (veRL's
// switch) or the task config asks for it (task.config.interaction: true, or
// task.configs.NAME.interaction in a mixed run).
func (t *Trainer) interactionOn(rt *runTask) bool {
	if t.cfg.ActorRolloutRef.Rollout.MultiTurn.InteractionConfigPath != nil {
		return true
	}
	tc, _ := t.cfg.TaskConfig(rt.name)
	v, _ := tc["interaction"].(bool)
	return v
}

// score runs the reward manager over finished trajectories: one score per output.
func (t *Trainer) score(ctx context.Context, outs []*rollout.Output) ([]float64, []reward.Result, reward.Stats, error) {
	items := make([]reward.Item, 0, len(outs))
	idx := make([]int, 0, len(outs))
	scores := make([]float64, len(outs))
	results := make([]reward.Result, len(outs))
	var toScore []*rollout.Output // those the task's End did not score
	for _, o := range outs {
		if !o.EndResult.HasReward {
			toScore = append(toScore, o)
		}
	}
	texts := rollout.ResponseTexts(t.tk, toScore) // their solutions, decoded on every core
	var st reward.Stats
	for i, o := range outs {
		if o.EndResult.HasReward {
			// End's reward is the task's final word: it must be a number to train on.
			r := o.EndResult.Reward
			err := reward.FiniteComponents(o.EndResult.RewardComponents)
			if math.IsNaN(r) || math.IsInf(r, 0) {
				err = fmt.Errorf("reward: the task's End gave reward %g", r)
			}
			if err != nil {
				results[i] = reward.Result{Err: fmt.Sprintf("%v (trajectory %s-%d)", err, o.Sample.UID, o.Sample.RolloutN)}
				st.Errors++
				continue
			}
			scores[i] = r
			results[i] = reward.Result{Score: r, Components: o.EndResult.RewardComponents}
			continue
		}
		extra := map[string]any{}
		for k, v := range o.Sample.Row.ExtraInfo {
			extra[k] = v
		}
		extra["num_turns"] = int64(o.NumTurns)
		extra["num_tool_calls"] = int64(o.ToolCalls)
		valid := 0
		for _, m := range o.ResponseMask {
			if m != 0 {
				valid++
			}
		}
		items = append(items, reward.Item{ScoreItem: task.ScoreItem{DataSource: o.Sample.Row.DataSource,
			Solution: texts[len(items)], GroundTruth: o.Sample.Row.RewardModel.GroundTruth, ExtraInfo: extra},
			ResponseLength: len(o.ResponseIDs)})
		idx = append(idx, i)
	}
	// Each task scores its own rows (a mixed run: one Score batch per task).
	ts, groups := t.tasks.groupByTask(len(items), func(j int) string { return items[j].DataSource })
	for k, rt := range ts {
		sub := make([]reward.Item, len(groups[k]))
		for n, j := range groups[k] {
			sub[n] = items[j]
		}
		res, s, err := t.rew.Score(ctx, rt.p, sub)
		if err != nil {
			if t.tasks.mixed() {
				err = fmt.Errorf("task %s: %w", rt.name, err)
			}
			return nil, nil, st, err
		}
		st.Scored += s.Scored
		st.Errors += s.Errors
		st.Timeouts += s.Timeouts
		st.Elapsed += s.Elapsed
		for n, r := range res {
			j := groups[k][n]
			scores[idx[j]] = r.Score
			results[idx[j]] = r
		}
		if failed := s.Errors + s.Timeouts; failed > 0 {
			first := ""
			for _, r := range res {
				if r.Err != "" {
					first = r.Err
					break
				}
			}
			t.log.Warn(fmt.Sprintf("%d of %d rewards failed: scored 0 (reward/errors, reward/timeouts)", failed, len(sub)),
				"task", rt.name, "first_error", first)
		}
	}
	for _, o := range outs {
		o.Trace.Stop() // the trajectory ends here; its root span is closed by endTraces
	}
	return scores, results, st, nil
}

// endTraces closes the root spans of scored trajectories with their reward, its components
// and, for a training step (adv non-nil, [B*Tr] as the update uses it), the trajectory's
// advantage: the mean over its response tokens (the one value GRPO gives all of them).
func (t *Trainer) endTraces(outs []*rollout.Output, scores []float64, results []reward.Result, b *batchOf, adv []float32) {
	for i, o := range outs {
		if o.Trace == nil {
			continue
		}
		root := o.Trace.Root()
		for k, v := range results[i].Components {
			root.SetAttr("reward/"+k, v)
		}
		root.SetAttr("num_turns", o.NumTurns)
		root.SetAttr("tool_calls", o.ToolCalls)
		root.SetAttr("finish_reason", o.FinishReason)
		if adv != nil && b != nil && len(adv) == b.B*b.Tr {
			if a, ok := rowMean(b.rows(adv, i, i+1), b.rows(b.mask, i, i+1)); ok {
				root.SetAttr("advantage", a)
			}
		}
		out := map[string]any{"score": scores[i], "num_turns": o.NumTurns, "tool_calls": o.ToolCalls,
			"response_tokens": len(o.ResponseIDs)}
		if results[i].Err != "" {
			out["score_error"] = results[i].Err
		}
		o.Trace.End(scores[i], out)
	}
}

// rowMean is the mean of x where mask is set; false when no element is.
func rowMean(x, mask []float32) (float64, bool) {
	var sum float64
	n := 0
	for j, m := range mask {
		if m != 0 {
			sum += float64(x[j])
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return sum / float64(n), true
}

// validate runs the validation set with val_kwargs and returns val-core metrics per data source.
func (t *Trainer) validate(ctx context.Context, step int) (map[string]float64, error) {
	vals := map[string]float64{}
	if len(t.val) == 0 {
		return vals, nil
	}
	start := time.Now()
	exs := make([]*example, len(t.val))
	for i := range t.val {
		exs[i] = &t.val[i]
	}
	n := max(t.cfg.ActorRolloutRef.Rollout.ValKwargs.N, 1)
	samples := t.samplesFor(exs, fmt.Sprintf("val%d", step), n, step, true)
	bar := progress.New(t.opts.Progress, fmt.Sprintf("validate (step %d)", step), int64(len(samples)), "trajectories")
	bar.Waiting(t.tasks.waitingOn)
	res, dropped, err := t.runRollouts(ctx, true, samples, bar)
	if err != nil {
		return nil, err
	}
	outs := res.Kept()
	scores, results, _, err := t.score(ctx, outs)
	if err != nil {
		return nil, err
	}
	t.endTraces(outs, scores, results, nil, nil)
	sum := map[string]float64{}
	cnt := map[string]float64{}
	tsum := map[string]float64{}
	tcnt := map[string]float64{}
	for i, o := range outs {
		ds := o.Sample.Row.DataSource
		sum[ds] += scores[i]
		cnt[ds]++
		tn := t.taskOf(o).name
		tsum[tn] += scores[i]
		tcnt[tn]++
	}
	for ds := range sum {
		vals[metrics.ValRewardKey(ds)] = sum[ds] / cnt[ds]
	}
	if len(outs) > 0 {
		// How the policy uses its tools under validation: calls per trajectory, and the
		// fraction of trajectories with at least one call.
		withCall := 0
		for _, o := range outs {
			if o.ToolCalls > 0 {
				withCall++
			}
		}
		rm := rollout.Metrics(outs)
		vals["val-aux/tool_calls/mean"] = rm["tool_calls/mean"]
		vals["val-aux/tool_call_fraction"] = float64(withCall) / float64(len(outs))
		vals["val-aux/num_turns/mean"] = rm["num_turns/mean"]
		vals["val-aux/response_length/mean"] = rm["response_length/mean"]
	}
	vals["val/dropped"] = float64(res.Dropped)
	if t.tasks.mixed() {
		// Per task as well as per data_source (a task may serve several sources).
		for tn := range tsum {
			vals[ValTaskRewardKey(tn)] = tsum[tn] / tcnt[tn]
		}
		for tn, d := range dropped {
			vals["val/dropped/"+tn] = float64(d[1])
		}
	}
	vals["timing_s/testing"] = time.Since(start).Seconds()
	if k := t.cfg.Trainer.LogValGenerations; k > 0 {
		for i, o := range outs {
			if i >= k {
				break
			}
			t.log.Info("validation generation", "step", step, "index", o.Sample.SampleIndex, "score", scores[i],
				"response", t.tk.Decode(o.ResponseIDs, true))
		}
	}
	return vals, nil
}

// runRollouts runs samples through the agent loops, ticking a progress bar as they finish.
func (t *Trainer) runRollouts(ctx context.Context, validate bool, samples []*rollout.Sample, bar *progress.Bar) (rollout.BatchResult, map[string][2]int, error) {
	if len(samples) > 0 && t.tracer != nil {
		seen := map[int64]bool{}
		var idx []int64
		for _, s := range samples {
			if !seen[s.SampleIndex] {
				seen[s.SampleIndex] = true
				idx = append(idx, s.SampleIndex)
			}
		}
		t.tracer.BeginStep(samples[0].Step, samples[0].Validate, idx)
	}
	res, dropped, err := t.runRolloutsByTask(ctx, validate, samples, bar)
	bar.Finish()
	return res, dropped, err
}

// trainStep is one step of GRPO/PPO.
func (t *Trainer) trainStep(ctx context.Context, step int) (map[string]float64, error) {
	cfg := t.cfg
	stepStart := time.Now()
	dev := startDeviceMeter(t.actor.Backend()) // trainer.device=cuda: waits, syncs, bytes
	vals := map[string]float64{}
	idx := t.sampler.Next()
	exs := make([]*example, len(idx))
	for i, j := range idx {
		exs[i] = &t.train[j]
	}
	n := cfg.ActorRolloutRef.Rollout.N
	samples := t.samplesFor(exs, fmt.Sprintf("s%d", step), n, step, false)

	// rollout
	genStart, genDev := time.Now(), dev.phaseStart()
	var prefilled0, shared0 int
	if t.policy != nil {
		prefilled0, shared0 = t.policy.PrefixStats()
	}
	bar := progress.New(t.opts.Progress, fmt.Sprintf("step %d/%d rollout", step, t.totalSteps), int64(len(samples)), "trajectories")
	bar.Waiting(t.tasks.waitingOn)
	res, dropped, err := t.runRollouts(ctx, false, samples, bar)
	if err != nil {
		return nil, err
	}
	genWall := time.Since(genStart)
	vals[metrics.TimingGen] = genWall.Seconds()
	genDev.addTo(vals, GenDeviceWait, GenHostFrac, genWall)
	if t.policy != nil {
		prefilled, shared := t.policy.PrefixStats()
		vals["rollout/prefill_tokens"] = float64(prefilled - prefilled0)
		vals["rollout/prefix_shared_tokens"] = float64(shared - shared0)
	}
	vals["rollout/retried"] = float64(res.Retried)
	vals["rollout/dropped"] = float64(res.Dropped)
	if t.tasks.mixed() {
		for tn, d := range dropped {
			vals["task/"+tn+"/retried"] = float64(d[0])
			vals["task/"+tn+"/dropped"] = float64(d[1])
		}
	}
	if t.chat != nil {
		for k, v := range rollout.ExternalDropMetrics(res.Errors) {
			vals["rollout/"+k] = v
		}
	}
	for _, e := range res.Errors {
		t.log.Warn("trajectory dropped after a retry", "error", e)
	}
	outs := res.Kept()
	vals["training/global_step"] = float64(step)
	vals["training/epoch"] = float64(t.sampler.Epoch)
	vals["rollout/failed_fraction"] = float64(res.Dropped) / float64(len(samples))
	if len(outs) == 0 || vals["rollout/failed_fraction"] > cfg.Trainer.MaxFailedFraction {
		for _, o := range outs {
			o.Trace.End(0, map[string]any{"error": "the step was not trained on"})
		}
		return nil, &skippedStep{vals: vals, first: firstErr(res.Errors).Error(),
			why: fmt.Sprintf("%d of %d trajectories failed", res.Dropped, len(samples))}
	}
	for k, v := range rollout.Metrics(outs) {
		vals[k] = v
	}
	b := newBatch(outs)

	// rewards
	rewStart := time.Now()
	scores, rres, rst, err := t.score(ctx, outs)
	if err != nil {
		return nil, err
	}
	var adv []float32 // the traces end with their advantage, or without it when the step fails before
	defer func() { t.endTraces(outs, scores, rres, b, adv) }()
	vals["timing_s/reward"] = time.Since(rewStart).Seconds()
	if t.rm != nil {
		// reward_model.enable: training rewards only; validation reports the task's score,
		// as veRL validates on its rule-based reward.
		s := time.Now()
		if err := t.rm.apply(outs, scores, rres, vals); err != nil {
			return nil, err
		}
		vals["timing_s/reward_model"] = time.Since(s).Seconds()
	}
	vals["reward/errors"] = float64(rst.Errors)
	vals["reward/timeouts"] = float64(rst.Timeouts)
	vals["reward/failed_fraction"] = float64(rst.Errors+rst.Timeouts) / float64(len(outs))
	if vals["reward/failed_fraction"] > cfg.Trainer.MaxFailedFraction {
		first := "none recorded"
		for _, r := range rres {
			if r.Err != "" {
				first = r.Err
				break
			}
		}
		return nil, &skippedStep{vals: vals, first: first,
			why: fmt.Sprintf("%d of %d rewards failed", rst.Errors+rst.Timeouts, len(outs))}
	}
	compSum, compCnt := map[string]float64{}, map[string]float64{}
	for _, r := range rres {
		for k, v := range r.Components {
			compSum[k] += v
			compCnt[k]++
		}
	}
	for k := range compSum {
		vals["reward/"+k+"/mean"] = compSum[k] / compCnt[k]
	}
	// Metrics the task's End reported per trajectory (swedev: tests fixed, tests broken, ...).
	endSum, endCnt := map[string]float64{}, map[string]float64{}
	for _, o := range outs {
		for k, v := range o.EndResult.Metrics {
			endSum[k] += v
			endCnt[k]++
		}
	}
	for k := range endSum {
		vals["env/"+k+"/mean"] = endSum[k] / endCnt[k]
	}

	// old and reference log-probs
	miniSeqs := cfg.ActorRolloutRef.Actor.PPOMiniBatchSize * n
	onPolicy := cfg.ActorRolloutRef.Actor.PPOEpochs == 1 && miniSeqs >= b.B
	var oldLogp, refLogp []float32
	if !onPolicy || cfg.Algorithm.UseKLInReward {
		s := time.Now()
		budget, key := cfg.LogProbBudget(false)
		order, spans, err := planLogProbsPacked(b, max(cfg.ActorRolloutRef.Rollout.LogProbMicroBatchSizePerGPU, 1), budget, key)
		if err != nil {
			return nil, err
		}
		if oldLogp, _, err = b.logProbsIn(t.actor, t.acts, order, spans); err != nil {
			return nil, err
		}
		vals[metrics.TimingOldLogProb] = time.Since(s).Seconds()
	}
	if t.ref != nil {
		s := time.Now()
		lora := t.ref == t.actor
		if lora {
			t.actor.SetAdaptersActive(false)
		}
		budget, key := cfg.LogProbBudget(true)
		order, spans, perr := planLogProbsPacked(b, max(cfg.ActorRolloutRef.Ref.LogProbMicroBatchSizePerGPU, 1), budget, key)
		if perr == nil {
			refLogp, _, err = b.logProbsIn(t.ref, t.refActs, order, spans)
		} else {
			err = perr
		}
		if lora {
			t.actor.SetAdaptersActive(true)
		}
		if err != nil {
			return nil, err
		}
		vals[metrics.TimingRef] = time.Since(s).Seconds()
	}

	// advantages
	if err := t.checkGroupsOneTask(outs); err != nil {
		return nil, err
	}
	tokenRewards := reward.PlaceOnLastToken(t.weightedScores(outs, scores), b.mask, b.B, b.Tr)
	if cfg.Algorithm.UseKLInReward {
		var kl float64
		tokenRewards, kl = algo.ApplyKLPenalty(tokenRewards, oldLogp, refLogp, b.mask, b.B, b.Tr, cfg.Algorithm.KLPenalty, t.klCtl.Beta())
		vals["actor/reward_kl_penalty"] = kl
		vals["actor/reward_kl_penalty_coeff"] = t.klCtl.Beta()
		t.klCtl.Update(kl, b.B)
	}
	groups := make([]string, b.B)
	for i, o := range outs {
		groups[i] = o.Sample.UID
	}
	values, err := t.criticValues(b, vals)
	if err != nil {
		return nil, err
	}
	var returns []float32
	adv, returns, err = t.advantages(outs, algo.AdvantageInput{TokenRewards: tokenRewards, Mask: b.mask,
		B: b.B, T: b.Tr, Groups: groups, Values: values, Gamma: cfg.Algorithm.Gamma, Lam: cfg.Algorithm.Lam, NormByStd: cfg.Algorithm.NormAdvByStdInGRPO})
	if err != nil {
		return nil, err
	}

	// update: the critic, then the actor once trainer.critic_warmup steps have passed (veRL:
	// the actor updates when critic_warmup <= step)
	if err := t.updateCritic(ctx, b, values, returns, adv, step, vals); err != nil {
		return nil, err
	}
	if cfg.Trainer.CriticWarmup <= step {
		upd, updDev := time.Now(), dev.phaseStart()
		um, err := t.update(ctx, b, adv, oldLogp, refLogp, step)
		if err != nil {
			return nil, err
		}
		for k, v := range um {
			vals[k] = v
		}
		updWall := time.Since(upd)
		vals[metrics.TimingUpdateActor] = updWall.Seconds()
		updDev.addTo(vals, UpdateDeviceWait, UpdateHostFrac, updWall)
		updDev.enqueueTo(vals, UpdateEnqueueTime)
	}

	// batch statistics
	var seqScore, seqReward, promptLen, respLen, clipped float64
	seqRewards := make([]float64, b.B)
	for i := 0; i < b.B; i++ {
		for j := 0; j < b.Tr; j++ {
			seqRewards[i] += float64(tokenRewards[i*b.Tr+j])
		}
	}
	for i, o := range outs {
		seqScore += scores[i]
		seqReward += seqRewards[i]
		promptLen += float64(len(o.PromptIDs))
		respLen += float64(len(o.ResponseIDs))
		if len(o.ResponseIDs) >= cfg.ResponseLength() || o.FinishReason == "length" {
			clipped++
		}
	}
	B := float64(b.B)
	vals[metrics.ScoreMean] = seqScore / B
	vals["critic/score/max"] = maxOf(scores)
	vals["critic/score/min"] = minOf(scores)
	vals[metrics.RewardMean] = seqReward / B
	vals[metrics.PromptLengthMean] = promptLen / B
	vals[metrics.ResponseClipRatio] = clipped / B
	vals["critic/advantages/mean"] = algo.MaskedMean(adv, b.mask)
	t.splitMetrics(vals, outs, scores, seqRewards)
	total := promptLen + respLen
	wall := time.Since(stepStart)
	stepTime := wall.Seconds()
	vals[metrics.TimingStep] = stepTime
	dev.addTo(vals, wall)
	vals[metrics.Throughput] = total / stepTime
	for k, v := range t.tracer.StepMetrics() {
		vals[k] = v
	}
	return vals, nil
}

// skippedStep is a training step that was not trained on: more than
// trainer.max_failed_fraction of its trajectories or rewards failed.
type skippedStep struct {
	vals  map[string]float64 // what was measured before it stopped
	why   string             // "3 of 4 trajectories failed"
	first string             // the first error
}

func (s *skippedStep) Error() string { return s.why + "; the first error: " + s.first }

// skip records a skipped step: a warning on the console, and the end of the run (the error
// it returns) when trainer.max_consecutive_failed_steps steps in a row were skipped.
func (t *Trainer) skip(step int, s *skippedStep) error {
	tc := t.cfg.Trainer
	first := oneLine(s.first)
	t.skipped++
	if t.skipped == 1 {
		t.streakErr = fmt.Sprintf("in step %d, %s; the first error: %s", step, s.why, first)
	}
	fmt.Fprintf(t.opts.Progress, "step %d: not trained on: %s (more than trainer.max_failed_fraction=%g); the first error: %s\n",
		step, s.why, tc.MaxFailedFraction, first)
	if t.skipped < tc.MaxConsecutiveFailedSteps {
		return nil
	}
	what := fmt.Sprintf("step %d was not trained on", step)
	if t.skipped > 1 {
		what = fmt.Sprintf("step %d: %d steps in a row were not trained on", step, t.skipped)
	}
	return fmt.Errorf("%s (trainer.max_consecutive_failed_steps=%d; a step is not trained on when more than trainer.max_failed_fraction=%g "+
		"of its trajectories or rewards fail): %s", what, tc.MaxConsecutiveFailedSteps, tc.MaxFailedFraction, t.streakErr)
}

// oneLine joins the lines of an error message with " | " and bounds its length, for the one
// line that ends a failed run.
func oneLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	out := strings.Join(lines, " | ")
	if len(out) > 1500 {
		out = out[:1500] + "…"
	}
	return out
}

func firstErr(errs []error) error {
	if len(errs) == 0 {
		return errors.New("none recorded")
	}
	return errs[0]
}

func maxOf(x []float64) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	return m
}

func minOf(x []float64) float64 {
	m := math.Inf(1)
	for _, v := range x {
		m = math.Min(m, v)
	}
	return m
}

// update runs the PPO epochs: mini-batches of ppo_mini_batch_size*n trajectories, each an
// optimiser step over micro-batches of ppo_micro_batch_size_per_gpu with gradient
// accumulation.
func (t *Trainer) update(ctx context.Context, b *batchOf, adv, oldLogp, refLogp []float32, step int) (map[string]float64, error) {
	cfg := t.cfg
	ac := cfg.ActorRolloutRef.Actor
	n := cfg.ActorRolloutRef.Rollout.N
	miniSeqs := max(ac.PPOMiniBatchSize*n, 1)
	micro := max(ac.PPOMicroBatchSizePerGPU, 1)
	t.opt.Config.LR = float32(t.learningRate(step))
	agg := algo.Agg{Mode: ac.LossAggMode, NormLen: cfg.ResponseLength()}
	pcfg := algo.PolicyLossConfig{ClipLow: cfg.ClipRatioLow(), ClipHigh: cfg.ClipRatioHigh(), ClipC: ac.ClipRatioC,
		AggMode: ac.LossAggMode, NormLen: cfg.ResponseLength()}
	var sums = map[string]float64{}
	var counts = map[string]float64{}
	add := func(k string, v float64) { sums[k] += v; counts[k]++ }
	order := make([]int, b.B)
	for i := range order {
		order[i] = i
	}
	// A permuted batch: trajectories of a mini-batch must be contiguous for pack/extract.
	perm := b
	var realTok, paddedTok int
	for epoch := 0; epoch < max(ac.PPOEpochs, 1); epoch++ {
		if ac.Shuffle {
			r := rand.New(rand.NewPCG(uint64(cfg.Trainer.Seed), uint64(step*1000+epoch)))
			r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		}
		if ac.UseDynamicBsz {
			// The same mini-batches, each sorted longest first for the token budget.
			for lo := 0; lo < b.B; lo += miniSeqs {
				sortByLength(b, order, lo, min(lo+miniSeqs, b.B))
			}
		}
		pAdv, pOld, pRef := adv, oldLogp, refLogp
		if ac.Shuffle || ac.UseDynamicBsz {
			perm = b.permute(order)
			pAdv, pOld, pRef = permuteRows(adv, order, b.Tr), permuteRows(oldLogp, order, b.Tr), permuteRows(refLogp, order, b.Tr)
		}
		for lo := 0; lo < perm.B; lo += miniSeqs {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			hi := min(lo+miniSeqs, perm.B)
			spans := fixedSpans(lo, hi, micro)
			if ac.UseDynamicBsz {
				var err error
				if spans, err = packedSpans(perm, lo, hi, ac.PPOMaxTokenLenPerGPU, "actor_rollout_ref.actor.ppo_max_token_len_per_gpu"); err != nil {
					return nil, err
				}
			}
			re, pa := paddingOf(perm, spans)
			realTok += re
			paddedTok += pa
			add("actor/micro_batches", float64(len(spans)))
			mask := perm.rows(perm.mask, lo, hi)
			gTok, gSeq := 0, 0
			for i := 0; i < hi-lo; i++ {
				has := false
				for j := 0; j < perm.Tr; j++ {
					if mask[i*perm.Tr+j] != 0 {
						gTok++
						has = true
					}
				}
				if has {
					gSeq++
				}
			}
			pc := pcfg
			pc.GlobalTokens, pc.GlobalSeqs = gTok, gSeq
			ag := agg
			ag.GlobalTokens, ag.GlobalSeqs = gTok, gSeq
			t.actor.ZeroGrads()
			for _, sp := range spans {
				mlo, mhi := sp.lo, sp.hi
				Bm := mhi - mlo
				mb, lay := perm.microBatch(sp)
				a := t.acts.For(mb)
				if err := t.actor.Forward(a, mb); err != nil {
					return nil, fmt.Errorf("trainer: forward: %w", err)
				}
				logp := make([]float32, Bm*perm.Tr)
				ent := make([]float32, Bm*perm.Tr)
				perm.extract(logp, a.Logp, lay, mlo, mhi)
				perm.extract(ent, a.Entropy, lay, mlo, mhi)
				mmask := perm.rows(perm.mask, mlo, mhi)
				old := logp
				if pOld != nil {
					old = perm.rows(pOld, mlo, mhi)
				}
				pl := algo.PolicyLoss(logp, old, perm.rows(pAdv, mlo, mhi), mmask, Bm, perm.Tr, pc)
				dlogp := pl.DLogp
				add(metrics.PGLoss, pl.Loss)
				add(metrics.PPOKL, pl.PPOKL)
				add("actor/pg_clipfrac", pl.ClipFrac)
				add("actor/pg_clipfrac_lower", pl.ClipFracLower)
				entLoss, entMean, dEnt := algo.EntropyBonus(ent, mmask, Bm, perm.Tr, ac.EntropyCoeff, ag)
				_ = entLoss
				add(metrics.Entropy, algo.MaskedMean(ent, mmask))
				_ = entMean
				if ac.UseKLLoss && pRef != nil {
					klLoss, klMean, dKL := algo.KLLoss(logp, perm.rows(pRef, mlo, mhi), mmask, Bm, perm.Tr, ac.KLLossType, ac.KLLossCoef, ag)
					add("actor/kl_loss", klLoss)
					add("actor/kl_coef", ac.KLLossCoef)
					_ = klMean
					for i := range dlogp {
						dlogp[i] += dKL[i]
					}
				}
				rowsD := make([]float32, mb.B*mb.T)
				rowsE := make([]float32, mb.B*mb.T)
				perm.scatter(rowsD, dlogp, lay, mlo, mhi)
				perm.scatter(rowsE, dEnt, lay, mlo, mhi)
				if err := t.actor.Backward(a, rowsD, rowsE); err != nil {
					return nil, fmt.Errorf("trainer: backward: %w", err)
				}
			}
			norm, err := t.opt.Update(t.actor)
			if err != nil {
				return nil, err
			}
			if math.IsNaN(norm) || math.IsInf(norm, 0) {
				return nil, fmt.Errorf("trainer: gradient norm is %v: the update was not finite", norm)
			}
			add(metrics.GradNorm, norm)
		}
	}
	out := map[string]float64{"actor/lr": float64(t.opt.Config.LR)}
	if paddedTok > 0 {
		// The share of the update's forward/backward rows that were padding.
		out["perf/update_padding_frac"] = 1 - float64(realTok)/float64(paddedTok)
	}
	for k, v := range sums {
		out[k] = v / counts[k]
	}
	return out, nil
}

// permute returns the batch with its trajectories in the given order.
func (b *batchOf) permute(order []int) *batchOf {
	outs := make([]*rollout.Output, len(order))
	for i, j := range order {
		outs[i] = b.outs[j]
	}
	nb := newBatch(outs)
	nb.Tr = b.Tr
	nb.mask = permuteRows(b.mask, order, b.Tr)
	return nb
}

func permuteRows(x []float32, order []int, Tr int) []float32 {
	if x == nil {
		return nil
	}
	out := make([]float32, len(x))
	for i, j := range order {
		copy(out[i*Tr:(i+1)*Tr], x[j*Tr:(j+1)*Tr])
	}
	return out
}

// learningRate is the actor's learning rate at a step: linear warm-up, then constant or
// cosine decay to min_lr_ratio.
func (t *Trainer) learningRate(step int) float64 {
	return lrSchedule(t.cfg.ActorRolloutRef.Actor.Optim, t.totalSteps).At(step, t.totalSteps)
}

// FallBackEOS gives a model whose checkpoint declares no eos id (config.json's and
// generation_config.json's eos_token_id absent, null or [], a GGUF without
// tokenizer.ggml.eos_token_id, a freshly made config, say) its tokenizer's eos, so that
// generation stops there rather than at no id, and says so on w. A model with eos ids keeps
// them: generation stops at any of them. path names the model in the message.
func FallBackEOS(w io.Writer, path string, m *model.Model, tk *tokenizer.Tokenizer) {
	if !m.FallBackEOS(tk.EOS()) {
		return
	}
	if tk.EOS() < 0 {
		fmt.Fprintf(w, "%s: neither the checkpoint nor the tokenizer declares an eos id; generation stops only at max tokens or a stop token\n", path)
		return
	}
	fmt.Fprintf(w, "%s: the checkpoint declares no eos_token_id (config.json, generation_config.json); generation stops at the tokenizer's eos (id %d)\n", path, tk.EOS())
}

// checkVocab refuses a tokenizer with more ids than the model embeds: its ids past vocab_size
// (its eos among them, perhaps) would index no row of the embedding. A model with more rows
// than its tokenizer has ids is accepted, as Hugging Face checkpoints often are (Qwen2.5 pads
// its 151665 ids to 151936): the policy may sample an id the tokenizer lacks, and
// [tokenizer.Tokenizer.Decode] leaves such ids out of the text, as the Rust library does.
func checkVocab(tk *tokenizer.Tokenizer, c model.Config, path string) error {
	if n := tk.VocabSize(); n > c.V {
		return fmt.Errorf("trainer: actor_rollout_ref.model.path %s: the tokenizer has %d ids but config.json's vocab_size is %d: "+
			"the ids from %d up have no embedding row", path, n, c.V, c.V)
	}
	return nil
}
