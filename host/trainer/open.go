package trainer

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rlhost/rlhost/gpu"
	"github.com/rlhost/rlhost/gpu/cpu"
	"github.com/rlhost/rlhost/gpu/model"
	"github.com/rlhost/rlhost/gpu/tokenizer"
	"github.com/rlhost/rlhost/gpu/weights"
	"github.com/rlhost/rlhost/host/algo"
	"github.com/rlhost/rlhost/host/chatserver"
	"github.com/rlhost/rlhost/host/config"
	"github.com/rlhost/rlhost/host/device"
	"github.com/rlhost/rlhost/host/dist"
	"github.com/rlhost/rlhost/host/reward"
	"github.com/rlhost/rlhost/host/rollout"
	"github.com/rlhost/rlhost/sdk/task"
)

// The steps of New, in the order it runs them. Each opens or loads one thing and sets it on the
// trainer; what a later step needs and the trainer does not keep travels in an opening.

// opening is what New's steps hand on that the trainer does not keep.
type opening struct {
	be         gpu.Backend         // trainer.device
	ck         *weights.Checkpoint // the actor's weights, until the models that copy them are made
	formatLine string              // the line that names the tool-call format ("": none to print)
}

// checkConfig refuses what the config cannot run: invalid keys, no task, an unknown estimator,
// aggregation mode or KL kind, clip ranges out of bounds, a prompt column other than veRL's.
func checkConfig(cfg *config.Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if len(cfg.TaskNames()) == 0 {
		return fmt.Errorf("trainer: no task: pass --task NAME (or set task.name)")
	}
	ac := cfg.ActorRolloutRef.Actor
	for _, err := range []error{algo.CheckEstimator(cfg.Algorithm.AdvEstimator), algo.CheckAggMode(ac.LossAggMode), algo.CheckKLKind(ac.KLLossType), algo.CheckKLKind(cfg.Algorithm.KLPenalty),
		algo.PolicyLossConfig{ClipLow: cfg.ClipRatioLow(), ClipHigh: cfg.ClipRatioHigh(), ClipC: ac.ClipRatioC, AggMode: ac.LossAggMode}.Check()} {
		if err != nil {
			return fmt.Errorf("trainer: %w", err)
		}
	}
	if cfg.Data.PromptKey != "" && cfg.Data.PromptKey != "prompt" {
		return fmt.Errorf("trainer: data.prompt_key=%s: rlhost reads the prompt column of veRL's schema; rename the column to \"prompt\"", cfg.Data.PromptKey)
	}
	return nil
}

// openRunDir makes the run directory and writes the run's config.yaml there; a fresh run
// (trainer.resume_mode=disable) refuses a directory that already holds a run.
func (t *Trainer) openRunDir(context.Context, *opening) error {
	if !t.dp.lead() { // rank 0's directory: it writes, the others read its checkpoints
		return nil
	}
	if t.cfg.Trainer.ResumeMode == "disable" {
		if err := t.checkFreshRunDir(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(t.runDir, 0o755); err != nil {
		return fmt.Errorf("trainer: run directory: %w", err)
	}
	return writeFileAtomic(filepath.Join(t.runDir, "config.yaml"), func(w *os.File) error { return t.cfg.WriteYAML(w) })
}

// openDevice opens the backend of trainer.device, with the precision of
// actor_rollout_ref.actor.dtype.
func (t *Trainer) openDevice(_ context.Context, o *opening) error {
	be, err := device.Open(t.cfg.Trainer.Device, "actor_rollout_ref.actor.dtype", t.cfg.ActorRolloutRef.Actor.Dtype, t.opts.Progress)
	if err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	o.be = be
	return nil
}

// openTaskPlugins starts the task plugins of task.name, after the Host service their judge
// calls (reward_model.judge), and checks that each runs as isolated as it must.
func (t *Trainer) openTaskPlugins(ctx context.Context, _ *opening) error {
	hs, err := t.startJudgeService()
	if err != nil {
		return err
	}
	if t.tasks, err = openTasks(ctx, t.cfg, t.opts.Plugin, hs, t.log); err != nil {
		return err
	}
	for _, rt := range t.tasks.list {
		if err := checkIsolation(ctx, rt.p, rt.name, t.cfg.Task.AllowWeakIsolation, t.opts.Progress); err != nil {
			return err
		}
	}
	return nil
}

// loadTokenizer loads the policy's tokenizer, with actor_rollout_ref.model.custom_chat_template
// in place of the model's chat template when it is set.
func (t *Trainer) loadTokenizer(context.Context, *opening) error {
	var err error
	if t.tk, err = tokenizer.Load(t.cfg.ActorRolloutRef.Model.Path); err != nil {
		return err
	}
	if src := t.cfg.ActorRolloutRef.Model.CustomChatTemplate; src != "" {
		if err := t.tk.SetChatTemplate(src, "actor_rollout_ref.model.custom_chat_template"); err != nil {
			return fmt.Errorf("trainer: %w", err)
		}
	}
	return nil
}

// loadActor loads the policy's weights (o.ck) into the actor, which must embed every id of the
// tokenizer, and gives it the tokenizer's eos when its checkpoint declares none.
func (t *Trainer) loadActor(_ context.Context, o *opening) error {
	mpath := t.cfg.ActorRolloutRef.Model.Path
	fmt.Fprintf(t.opts.Progress, "loading %s\n", mpath)
	var err error
	if o.ck, err = weights.Load(mpath); err != nil {
		return err
	}
	if t.actor, err = model.New(o.be, o.ck); err != nil {
		return err
	}
	fmt.Fprintf(t.opts.Progress, "model %s\n", t.actor.Config.Describe())
	if err := checkVocab(t.tk, t.actor.Config, mpath); err != nil {
		return err
	}
	FallBackEOS(t.opts.Progress, mpath, t.actor, t.tk)
	return nil
}

// resolveToolFormat picks the tool-call format (actor_rollout_ref.rollout.multi_turn.format;
// auto: from the chat template) and the way prompts are rendered (t.render). The line naming the
// format (o.formatLine) is printed before the first prompt with tools, unless it is the
// default, hermes, chosen by auto.
func (t *Trainer) resolveToolFormat(_ context.Context, o *opening) error {
	asked := t.cfg.ActorRolloutRef.Rollout.MultiTurn.Format
	format, line, err := rollout.ResolveToolFormat(t.tk, asked)
	if err != nil {
		return err
	}
	if format == tokenizer.ToolFormatHermes && asked == "auto" {
		line = "" // the default as before: nothing new to say
	}
	o.formatLine = line
	t.render = rollout.Chat{Tok: t.tk, Kwargs: t.cfg.Data.ApplyChatTemplateKwargs, Format: format}
	return nil
}

// needRef reports whether a KL term needs the reference policy's log-probs.
func (t *Trainer) needRef() bool {
	return t.cfg.ActorRolloutRef.Actor.UseKLLoss || t.cfg.Algorithm.UseKLInReward
}

// enableLoRA gives the actor LoRA adapters (actor_rollout_ref.model.lora_rank > 0): the base
// is frozen, and the reference policy is the actor with its adapters off.
func (t *Trainer) enableLoRA(context.Context, *opening) error {
	mc := t.cfg.ActorRolloutRef.Model
	if mc.LoraRank <= 0 {
		return nil
	}
	if err := t.actor.EnableLoRA(model.LoRAConfig{Rank: mc.LoraRank, Alpha: float32(mc.LoraAlpha),
		Targets: mc.TargetModules, Seed: uint64(t.cfg.Trainer.Seed)}); err != nil {
		return fmt.Errorf("trainer: actor_rollout_ref.model: %w", err)
	}
	if t.needRef() {
		t.ref = t.actor
		t.refActs = model.NewActsCache(t.actor, 4)
	}
	return nil
}

// openReference makes the reference policy when a KL term needs it and the actor has no
// adapters: a frozen copy of the initial weights.
func (t *Trainer) openReference(_ context.Context, o *opening) error {
	if t.cfg.ActorRolloutRef.Model.LoraRank > 0 || !t.needRef() {
		return nil
	}
	var err error
	if t.ref, err = model.New(o.be, o.ck); err != nil {
		return err
	}
	t.refActs = model.NewActsCache(t.ref, 4)
	return nil
}

// loadCritic makes the critic (critic.enable, adv_estimator=gae): the actor's weights or
// critic.model.path's, with a value head. It is the last model made from the actor's weights,
// which it lets go.
func (t *Trainer) loadCritic(_ context.Context, o *opening) error {
	var err error
	if t.cfg.CriticEnabled() {
		t.critic, err = openCritic(o.be, t.cfg.Critic, t.cfg.ActorRolloutRef.Model.Path, o.ck, t.actor, t.tk)
		if t.critic != nil {
			t.critic.dp = t.dp
			if t.dp.shards(t.cfg.Critic.FSDP.FSDPSize) {
				t.critic.shard(t.dp)
			}
		}
	}
	o.ck = nil
	return err
}

// loadRewardModel loads the reward model of reward_model.enable.
func (t *Trainer) loadRewardModel(_ context.Context, o *opening) error {
	rc := t.cfg.RewardModel
	if !rc.Enable {
		return nil
	}
	fmt.Fprintf(t.opts.Progress, "loading reward model %s\n", rc.Model.Path)
	var err error
	t.rm, err = openRewardModel(o.be, rc, t.tk)
	return err
}

// openOptimizer makes the actor's AdamW (actor_rollout_ref.actor.optim, grad_clip) and the
// activations of its forward and backward passes.
func (t *Trainer) openOptimizer(context.Context, *opening) error {
	t.acts = model.NewActsCache(t.actor, 4)
	o := t.cfg.ActorRolloutRef.Actor.Optim
	betas := o.Betas
	if len(betas) != 2 {
		betas = []float64{0.9, 0.999}
	}
	eps := o.Eps
	if eps == 0 {
		eps = 1e-8
	}
	cfg := model.AdamWConfig{LR: float32(o.LR), Beta1: float32(betas[0]), Beta2: float32(betas[1]),
		Eps: float32(eps), WeightDecay: float32(o.WeightDecay), MaxGradNorm: float32(t.cfg.ActorRolloutRef.Actor.GradClip)}
	if t.dp.shards(t.cfg.ActorRolloutRef.Actor.FSDPConfig.FSDPSize) {
		// t.opt keeps the schedule's learning rate and the step; the moments are the shard's
		t.opt = &model.AdamW{Config: cfg}
		t.dp.zero = dist.NewZeRO1(t.dp.comm, t.actor, cfg)
		return nil
	}
	t.opt = model.NewAdamW(t.actor, cfg)
	return nil
}

// maxContext is the longest sequence the run generates: prompt, response and a margin.
func (t *Trainer) maxContext() int { return t.cfg.PromptLength() + t.cfg.ResponseLength() + 8 }

// openRollout makes what generates the rollouts: the external engine
// (actor_rollout_ref.rollout.name=openai), or the built-in policy over the actor with the
// weights of actor_rollout_ref.rollout.dtype.
func (t *Trainer) openRollout(context.Context, *opening) error {
	if err := t.openEngine(); err != nil || t.engine != nil {
		return err
	}
	r := t.cfg.ActorRolloutRef.Rollout
	var err error
	if t.policy, err = rollout.NewModelPolicy(t.actor, r.MaxNumSeqs, t.maxContext()); err != nil {
		return err
	}
	d, err := t.policy.SetDtype(r.Dtype)
	if err != nil {
		return fmt.Errorf("trainer: actor_rollout_ref.rollout.dtype: %w", err)
	}
	if r.Dtype == "auto" {
		fmt.Fprintf(t.opts.Progress, "rollout weights: %v (actor_rollout_ref.rollout.dtype=auto; CPU kernels: %v)\n", d, cpu.BestLowpISA)
	}
	return nil
}

// openJudge sets the judge of reward_model.judge.backend behind the Host service (setJudge).
func (t *Trainer) openJudge(_ context.Context, o *opening) error {
	return t.setJudge(o.be, t.maxContext(), t.opts.Progress)
}

// openChatServer serves the policy as an OpenAI endpoint when a task runs external episodes
// (task feature external_episode).
func (t *Trainer) openChatServer(context.Context, *opening) error {
	if !t.tasks.has(task.FeatureExternalEpisode) {
		return nil
	}
	t.chat = chatserver.New(t.rolloutPolicy(), t.tk, chatserver.Options{MaxContext: t.maxContext(),
		TemplateKwargs: t.render.Kwargs, ToolFormat: t.render.Format})
	return t.chat.Start()
}

// openRewardManager makes the reward manager of reward_model.reward_manager, with its workers,
// timeout, component weights and DAPO's overlong penalty.
func (t *Trainer) openRewardManager(context.Context, *opening) error {
	cfg := t.cfg
	ob, err := cfg.OverlongBuffer()
	if err != nil {
		return err
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
			return fmt.Errorf("trainer: reward_model.reward_weights.%s = %v: want a number", k, v)
		}
	}
	t.rew, err = reward.New(reward.Config{Kind: cfg.RewardModel.RewardManager, Workers: cfg.RewardModel.NumWorkers,
		Timeout: time.Duration(cfg.ScoreTimeout() * float64(time.Second)), Weights: weightsCfg,
		Overlong: reward.Overlong{Enable: ob.Enable, MaxLen: cfg.ResponseLength(), Buffer: ob.Len, PenaltyFactor: ob.PenaltyFactor}})
	return err
}

// openKLController makes the coefficient of the KL in the reward (algorithm.kl_ctrl): fixed or
// adaptive.
func (t *Trainer) openKLController(context.Context, *opening) error {
	kc := t.cfg.Algorithm.KLCtrl
	if kc.Type == "adaptive" {
		t.klCtl = algo.NewAdaptiveKLController(kc.KLCoef, kc.TargetKL, kc.Horizon)
	} else {
		t.klCtl = algo.NewFixedKLController(kc.KLCoef)
	}
	return nil
}

// warnToolsOnce prints the tool-call format and warns when the chat template drops the tools
// (warnDroppedTools).
func (t *Trainer) warnToolsOnce(_ context.Context, o *opening) error {
	return t.warnDroppedTools(t.opts.Progress, t.cfg.ActorRolloutRef.Model.Path, t.cfg.ActorRolloutRef.Rollout.Agent.DefaultAgentLoop, o.formatLine)
}

// resumeRun restores the checkpoint trainer.resume_mode names, if any (resume).
func (t *Trainer) resumeRun(context.Context, *opening) error { return t.resume() }

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
